job "a" {
  on_elected {
    exec {
      command = ["x"]
      timeout = "-1s" # ERROR: Invalid duration
    }
  }
}
