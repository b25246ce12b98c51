# env: MONGO_URI
#
# MongoDB: one document per job with a unique _id, updated atomically.

provider "mongodb" "m" {
  uri        = env("MONGO_URI")
  database   = "electd"
  collection = "leases"
}

job "event-relay" {
  run {
    command = ["/usr/local/bin/event-relay", "--fencing-token", "${event.token}"]
  }
  on_demoted {
    exec { command = ["logger", "-t", "electd", "event-relay demoted on ${event.node}"] }
  }
}
