provider "sql" "main" {
  driver = "oracle"
  dsn    = env("ELECTD_GOLDEN_DSN")
}
provider "redis" "r" {
  addresses = ["r1:6379", "r2:6379"]
}

job "billing-sync" {
  ttl         = "10s"
  renew_every = "4s"
  run {
    command     = ["/usr/local/bin/billing-sync", "${event.tokn}"]
    stop_signal = "SIGTERMINATE"
  }
}

job "report" {
  mode = "lock"
  task {
    schedule = "0 25 * * *"
    command  = ["report"]
  }
}
