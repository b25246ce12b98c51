# A job with every block, on a postgres provider whose DSN comes from env.
agent {
  node_id          = "web-1"
  listen           = "0.0.0.0:8790"
  api_token        = env("ELECTD_TEST_TOKEN")
  log_level        = "debug"
  log_format       = "json"
  shutdown_timeout = "45s"
}

provider "sql" "main" {
  driver = "postgres"
  dsn    = env("ELECTD_TEST_DSN")
}

job "billing-sync" {
  provider    = sql.main
  mode        = "leader"
  ttl         = "30s"
  renew_every = "5s"
  retry_every = "3s"

  run {
    command      = ["/usr/local/bin/billing-sync", "--token", "${event.token}", upper(event.type)]
    env          = { REGION = "eu", JOB = event.job }
    dir          = "/srv/${event.job}"
    stop_signal  = "INT"
    stop_timeout = "10s"
    restart      = "always"
    restart_wait = "3s"
  }

  on_elected {
    exec { command = ["logger", "electd: ${event.job} elected on ${event.node}"] }
    webhook {
      url = "https://hooks.example.com/elected"
    }
    exec {
      command = ["true"]
      timeout = "2s"
    }
  }
  on_demoted {
    webhook {
      url    = "https://hooks.example.com/electd"
      secret = env("ELECTD_TEST_SECRET")
    }
  }
  on_leader_change {
    webhook {
      url          = "https://hooks.example.com/${event.job}"
      body         = jsonencode({ text = "${event.leader} now leads ${event.job} (token ${event.token})", previous = event.previous_leader })
      headers      = { "X-Team" = "ops", "X-Time" = event.time }
      timeout      = "5s"
      max_attempts = 3
      ca_file      = "/etc/ssl/hooks.pem"
    }
  }
}
