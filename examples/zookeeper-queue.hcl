# A queue consumer and a nightly job on a ZooKeeper ensemble that the
# cluster already runs (Kafka, HBase, Solr, ClickHouse). Every node runs
# this file.
#
# Each job has a persistent znode /electd/<job> that keeps the fencing token
# (one more per term, through releases, expiries and ZooKeeper restarts) and
# an ephemeral child /electd/<job>/holder in the holder's session, which
# ZooKeeper deletes when the session expires. A ttl becomes a session
# timeout: it must lie within the servers' minSessionTimeout and
# maxSessionTimeout (4 s to 40 s with the default tickTime of 2 s), or the
# provider refuses the ttl. See docs/providers/zookeeper.md.

provider "zookeeper" "main" {
  servers         = ["10.0.0.21:2181", "10.0.0.22:2181", "10.0.0.23:2181"]
  root            = "/electd"
  username        = "electd" # digest authentication; the znodes are created for this user only
  password        = env("ELECTD_ZK_PASSWORD")
  connect_timeout = "10s"
}

# A long-running consumer on exactly one node. On a graceful stop the next
# node is woken by a ZooKeeper watch and takes over within milliseconds;
# after a crash it takes over when ZooKeeper expires the crashed node's
# session (within the ttl, plus up to a tick).
job "orders-consumer" {
  ttl         = "15s"
  renew_every = "4s"
  retry_every = "2s"

  run {
    command      = ["/usr/local/bin/orders-consumer", "--fencing-token", "${event.token}"]
    stop_signal  = "SIGTERM"
    stop_timeout = "5s"
    restart      = "on-failure"
  }

  on_leader_change {
    exec { command = ["logger", "-t", "electd", "${event.leader} leads ${event.job} (token ${event.token})"] }
  }
}

# Once a night, on one node only: each node competes per run, the winner
# runs it and releases. The slot it ran for travels with the lease, so a
# slot is never run twice.
job "compact-topics" {
  mode = "lock"
  ttl  = "30s"

  task {
    schedule     = "15 3 * * *"
    command      = ["/usr/local/bin/compact-topics"]
    timeout      = "30m"
    stop_timeout = "10s"
  }
}
