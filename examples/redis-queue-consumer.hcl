# A queue consumer on a single Redis server. A released lease is published,
# so a waiting node takes over at once.

provider "redis" "cache" {
  addresses = ["127.0.0.1:6379"]
}

job "queue-consumer" {
  ttl         = "15s"
  renew_every = "4s"

  run {
    command = ["/usr/local/bin/consumer", "--queue", "orders"]
    restart = "always"
  }
}
