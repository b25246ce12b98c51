job "a" {
  run {
    command = ["x"]
    env     = "A=1" # ERROR: Incorrect attribute value type
  }
}
