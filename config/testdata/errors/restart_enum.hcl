job "a" {
  run {
    command = ["x"]
    restart = "unless-stopped" # ERROR: Invalid restart
  }
}
