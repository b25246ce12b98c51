job "a" {
  on_elected {
    exec {
      command = ["x"]
      shell   = true # ERROR: Unsupported argument
    }
  }
}
