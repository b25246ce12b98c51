job "a" {
  run {
    command = "ls -l" # ERROR: Incorrect attribute value type
  }
}
