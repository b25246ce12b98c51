# env: ELECTD_MYSQL_DSN
#
# A nightly report on MySQL/MariaDB in lock mode: every node competes for each
# run; the winner runs it and releases. The slot it ran is recorded with the
# lease, so the report runs at most once per night across the cluster.

provider "sql" "reports" {
  driver = "mysql"
  dsn    = env("ELECTD_MYSQL_DSN")
}

job "nightly-report" {
  mode = "lock"
  ttl  = "30s"

  task {
    schedule     = "30 2 * * *"
    command      = ["/usr/local/bin/report", "--date", "yesterday"]
    timeout      = "10m"
    stop_timeout = "5s"
  }

  on_elected {
    exec { command = ["logger", "-t", "electd", "nightly report starts on ${event.node}"] }
  }
}
