# env: ELECTD_PG_DSN
# vars: queue_url (required), shards (default 16)
#
# Sixteen shards of a queue consumer, each a job of its own with its own
# lease: one block with for_each instead of sixteen copies. The instances
# are named sharded-consumer.00 to sharded-consumer.15; that is their lease
# key, their name in `electd status`, `history`, `step-down` and the
# metrics. With balance on (the default), the agents share the shards out.
#
# The queue's URL is an input variable, set when the agent starts:
#   electd run -config /etc/electd -var queue_url=amqp://consumer:PW@mq.internal/orders
# or with ELECTD_VAR_queue_url in the unit's environment, or in a file such
# as /etc/electd/queue.auto.electdvars (queue_url = "amqp://..."). It is
# sensitive: its value (the password in it) is masked in the agent's log and
# API, like every secret of the configuration.
#
# Growing or shrinking the set (-var shards=32, then SIGHUP or
# `electd reload -var shards=32`) starts or stops only the shards that come
# or go; the others keep their leader, token and child. `electd plan
# -var shards=32` shows which, before the reload.

variable "queue_url" {
  type        = string
  description = "The AMQP URL of the queue the shards consume."
  sensitive   = true

  validation {
    condition     = can(regex("^amqps?://", var.queue_url))
    error_message = "The queue_url must be an amqp:// or amqps:// URL."
  }
}

variable "shards" {
  type        = number
  description = "How many shards the queue has."
  default     = 16

  validation {
    condition     = var.shards >= 1 && var.shards <= 256 && floor(var.shards) == var.shards
    error_message = "The shards must be a whole number from 1 to 256."
  }
}

locals {
  # Two digits, so that the shards sort in order in every listing.
  shard_ids = toset([for i in range(var.shards) : format("%02d", i)])
}

provider "sql" "main" {
  driver = "postgres"
  dsn    = env("ELECTD_PG_DSN")
  table  = "electd_leases"
}

job "sharded-consumer" {
  for_each    = local.shard_ids
  provider    = sql.main
  ttl         = "15s"
  renew_every = "4s"
  retry_every = "2s"

  run {
    # The fencing token goes with every offset the shard commits, so a
    # paused, deposed consumer cannot commit over its successor.
    command = [
      "/usr/local/bin/consumer",
      "--queue", var.queue_url,
      "--shard", each.key,
      "--shards", tostring(var.shards),
      "--fencing-token", "${event.token}",
    ]
    env          = { SHARD = each.key }
    stop_signal  = "SIGTERM"
    stop_timeout = "5s"
    restart      = "always"
  }

  health {
    http     = "http://127.0.0.1:${9100 + tonumber(each.key)}/healthz"
    interval = "10s"
  }
}
