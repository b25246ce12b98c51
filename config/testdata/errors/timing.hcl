job "a" {
  ttl         = "10s" # ERROR: Unsafe lease timing
  renew_every = "4s"
  run {
    command      = ["x"]
    stop_timeout = "3s"
  }
}
