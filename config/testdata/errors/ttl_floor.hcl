job "tiny" {
  ttl         = "100ms" # ERROR: Invalid ttl
  renew_every = "10ms"
}
job "no-margin" {
  ttl         = "1s" # ERROR: Unsafe lease timing
  renew_every = "50ms"
  run {
    command      = ["x"]
    stop_timeout = "880ms"
  }
}
