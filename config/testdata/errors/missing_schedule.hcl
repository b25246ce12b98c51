job "a" {
  task { # ERROR: Missing required argument
    command = ["x"]
  }
}
