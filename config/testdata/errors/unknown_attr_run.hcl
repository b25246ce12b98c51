job "a" {
  run {
    command = ["x"]
    user    = "nobody" # ERROR: Unsupported argument
  }
}
