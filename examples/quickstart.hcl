# Quickstart: every node runs this same file. No provider block is declared,
# so electd uses its embedded default, a SQLite file beside this one,
# examples/electd.db (provider sql.default). Start it with `make run`, then run `make run` again
# in two more terminals: one agent leads, and when you stop it (Ctrl-C) or kill
# it, another takes over.

agent {
  # Each agent on one machine needs its own port: ELECTD_LISTEN=127.0.0.1:8791 make run
  listen = env("ELECTD_LISTEN", "127.0.0.1:8790")
  # and its own node_id, named after the port here ("quickstart-8791"). On
  # real machines leave node_id out: it defaults to the host name.
  node_id   = "quickstart-${split(":", env("ELECTD_LISTEN", "127.0.0.1:8790"))[1]}"
  log_level = "info"
}

# A long-running worker that must run on exactly one node.
job "queue-consumer" {
  ttl         = "10s"
  renew_every = "3s"
  retry_every = "1s"

  run {
    command      = ["sh", "-c", "while true; do echo \"consuming as $ELECTD_NODE, fencing token $ELECTD_TOKEN\"; sleep 5; done"]
    stop_timeout = "2s"
  }

  on_elected {
    exec { command = ["echo", "elected: ${event.node} leads ${event.job} with token ${event.token}"] }
  }
  on_demoted {
    exec { command = ["echo", "demoted: ${event.node} no longer leads ${event.job}"] }
  }
  on_leader_change {
    exec { command = ["echo", "leader of ${event.job} is now ${event.leader} (was '${event.previous_leader}')"] }
  }
}

# A scheduled task that runs on the leader only, once per slot across the cluster.
job "report" {
  ttl         = "10s"
  renew_every = "3s"
  retry_every = "1s"

  task {
    schedule     = "@every 30s"
    command      = ["sh", "-c", "echo \"report for slot run by $ELECTD_NODE at $(date -u +%T)\""]
    timeout      = "20s"
    stop_timeout = "2s"
  }
}
