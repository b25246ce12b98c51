job "a" {
  run {
    command     = ["x"]
    stop_signal = "SIGSTOPPLEASE" # ERROR: Invalid stop signal
  }
}
