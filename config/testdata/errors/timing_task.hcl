job "a" {
  renew_every = "6s" # ERROR: Unsafe lease timing
  task {
    schedule     = "@hourly"
    command      = ["x"]
    stop_timeout = "5s"
  }
}
