agent {
  shutdown_timeout = "5s" # ERROR: shutdown_timeout too short
}
job "slow" {
  ttl         = "30s"
  renew_every = "5s"
  run {
    command      = ["x"]
    stop_timeout = "10s"
  }
}
job "fast" {
  run {
    command = ["x"]
  }
}
