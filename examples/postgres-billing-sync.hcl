# env: ELECTD_PG_DSN HOOK_SECRET SLACK_WEBHOOK_URL
#
# A billing sync that must never run twice at once, on PostgreSQL. A graceful
# handover is instant: a released lease is announced with NOTIFY.
# The fencing token is passed to the worker, which writes it with every
# change so the database rejects writes from a paused, deposed leader.

agent {
  api_token = env("ELECTD_API_TOKEN", "")
}

provider "sql" "main" {
  driver = "postgres"
  dsn    = env("ELECTD_PG_DSN")
  table  = "electd_leases"
}

job "billing-sync" {
  provider    = sql.main
  ttl         = "30s"
  renew_every = "5s"
  retry_every = "2s"

  run {
    command      = ["/usr/local/bin/billing-sync", "--fencing-token", "${event.token}"]
    env          = { REGION = "eu" }
    dir          = "/srv/billing"
    stop_signal  = "SIGTERM"
    stop_timeout = "10s"
    restart      = "on-failure"
  }

  # Tell the team's chat room when leadership moves. on_elected fires only on
  # the new leader, so the room gets one message per change; on_leader_change
  # would send one from every node. Signed so the receiver can check it came
  # from electd (X-Electd-Signature-256, see docs/webhooks.md).
  on_elected {
    exec { command = ["logger", "-t", "electd", "${event.job} elected on ${event.node}"] }
    webhook {
      url          = env("SLACK_WEBHOOK_URL")
      secret       = env("HOOK_SECRET")
      body         = jsonencode({ text = "${event.leader} now leads ${event.job} (token ${event.token}, was ${event.previous_leader})" })
      headers      = { "X-Team" = "billing" }
      timeout      = "5s"
      max_attempts = 5
    }
  }
}
