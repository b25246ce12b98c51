job "a" {
  run { # ERROR: Missing required argument
    dir = "/tmp"
  }
}
