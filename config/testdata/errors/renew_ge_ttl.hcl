job "a" {
  ttl         = "10s"
  renew_every = "10s" # ERROR: Invalid renew_every
}
