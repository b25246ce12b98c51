# A cluster-wide scheduler on etcd, which operators often already run for
# consensus (Kubernetes, Patroni, CoreDNS). Every node runs this file.
#
# Each job holds two keys under the prefix: /electd/<job> exists while the
# job is held and is attached to the agent's etcd lease for the job's ttl
# (rounded up to whole seconds; one per agent and ttl, however many jobs);
# /electd/<job>/record keeps the fencing token, which grows by one per term
# and survives releases, expiries and etcd restarts.
# The etcd user needs read and write on the prefix: see docs/providers/etcd.md.

provider "etcd" "main" {
  endpoints    = ["10.0.0.11:2379", "10.0.0.12:2379", "10.0.0.13:2379"]
  prefix       = "/electd/"
  username     = "electd"
  password     = env("ELECTD_ETCD_PASSWORD")
  dial_timeout = "5s"
}

# A long-running process on exactly one node. On a graceful stop the next
# node is woken by an etcd watch and takes over within milliseconds; after a
# crash it takes over once etcd expires the lease (ttl, plus up to ~1 s).
job "scheduler" {
  ttl         = "15s"
  renew_every = "4s"
  retry_every = "2s"

  run {
    command      = ["/usr/local/bin/scheduler", "--fencing-token", "${event.token}"]
    stop_signal  = "SIGTERM"
    stop_timeout = "5s"
    restart      = "on-failure"
  }

  on_leader_change {
    exec { command = ["logger", "-t", "electd", "${event.leader} leads ${event.job} (token ${event.token})"] }
  }
}

# Every 15 minutes, on one node only: each node competes per run, the winner
# runs it and releases. The slot it ran for travels with the lease, so a slot
# is never run twice.
job "cleanup" {
  mode = "lock"
  ttl  = "30s"

  task {
    schedule     = "*/15 * * * *"
    command      = ["/usr/local/bin/cleanup", "--older-than", "7d"]
    timeout      = "5m"
    stop_timeout = "10s"
  }
}
