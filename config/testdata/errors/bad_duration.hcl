job "a" {
  ttl = "30 seconds" # ERROR: Invalid duration
  run {
    command      = ["x"]
    stop_timeout = "5" # ERROR: Invalid duration
  }
}
