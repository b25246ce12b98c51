# Singleton workers on a NATS cluster with JetStream (2.9 or later), for
# sites that already run NATS for messaging. Every node runs this file.
#
# The leases live in the JetStream key-value bucket "electd" (created on
# first use: one revision per key, no bucket ttl, file storage, 3 replicas).
# Each job is one key holding its holder, fencing token, ttl and value;
# every write is a compare-and-set on the key's revision, and a term's end
# is judged by the NATS server's timestamps, never by a node's clock. The
# user in the credentials file needs the JetStream API and the bucket's
# subjects: see docs/providers/nats.md.

provider "nats" "main" {
  servers          = ["tls://nats-1.internal.example.com:4222", "tls://nats-2.internal.example.com:4222", "tls://nats-3.internal.example.com:4222"]
  bucket           = "electd"
  replicas         = 3
  credentials_file = "/etc/electd/nats.creds"
  connect_timeout  = "5s"
}

# A long-running consumer on exactly one node. On a graceful stop the next
# node hears of the release through a key-value watch and takes over within
# milliseconds; after a crash it takes over when the term has expired by
# the server's clock (ttl after the last renewal).
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

# Every hour, on one node only: the slot it ran for travels with the lease,
# so a slot is never run twice.
job "compact-streams" {
  mode = "lock"
  ttl  = "30s"

  task {
    schedule     = "0 * * * *"
    command      = ["/usr/local/bin/compact-streams"]
    timeout      = "20m"
    stop_timeout = "10s"
  }
}
