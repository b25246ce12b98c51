job "a" {
  run {
    command = [] # ERROR: Empty command
  }
}
