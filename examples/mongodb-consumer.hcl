# env: MONGO_URI
#
# MongoDB: one document per job in electd.leases, _id = the job name, taken
# and renewed with one atomic findAndModify each. MONGO_URI names the replica
# set, e.g. mongodb://electd:PASSWORD@db1,db2,db3/?replicaSet=rs0&authSource=admin;
# the user needs readWrite on the database (see docs/providers/mongodb.md).
#
# On MongoDB 4.2 and later expiry is judged by the server's clock ($$NOW).
# On older servers, and on FerretDB, electd logs a warning and judges expiry
# by each node's clock; FerretDB v1 is also not atomic under racing acquires
# and cannot arbitrate between several nodes safely.
#
# No change notification: a waiting node notices a release on its next
# retry_every.

provider "mongodb" "m" {
  uri           = env("MONGO_URI")
  database      = "electd"
  collection    = "leases"
  write_concern = "majority" # the default; a number of members or a custom write concern name also work
}

job "event-relay" {
  ttl         = "15s"
  renew_every = "4s"
  retry_every = "1s"

  run {
    command      = ["/usr/local/bin/event-relay", "--fencing-token", "${event.token}"]
    stop_signal  = "SIGTERM"
    stop_timeout = "5s"
    restart      = "on-failure"
  }

  on_demoted {
    exec { command = ["logger", "-t", "electd", "event-relay demoted on ${event.node}"] }
  }
}
