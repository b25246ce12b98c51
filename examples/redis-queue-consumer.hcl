# env: REDIS_PASSWORD (optional)
#
# A queue consumer that must run on exactly one node, on a single Redis
# server. A released lease is published on electd:notify:queue-consumer, so a
# waiting node takes over within a millisecond or two; after a crash the
# others wait out the ttl. The consumer gets the fencing token and stores it
# with each offset it commits, so a paused, deposed consumer cannot commit.
#
# Redis keeps the token counter in memory: run it with appendonly yes and
# appendfsync always, or a restarted server starts tokens again at 1.
#
# For Redlock, list three or more independent servers instead (electd check
# warns what Redlock does and does not guarantee; see docs/providers/redis.md):
#   addresses = ["10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"]

provider "redis" "queue" {
  addresses = ["127.0.0.1:6379"]
  password  = env("REDIS_PASSWORD", "")
  db        = 0
  prefix    = "electd:"
}

job "queue-consumer" {
  provider    = redis.queue
  ttl         = "15s"
  renew_every = "4s"
  retry_every = "2s"

  run {
    command      = ["/usr/local/bin/consumer", "--queue", "orders", "--fencing-token", "${event.token}"]
    stop_signal  = "SIGTERM"
    stop_timeout = "5s"
    restart      = "always"
  }
}
