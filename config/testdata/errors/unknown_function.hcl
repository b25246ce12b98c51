job "a" {
  run {
    command = [shell("x")] # ERROR: Call to unknown function
  }
}
