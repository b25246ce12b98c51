# Settings that leave a clustered store unsafe or without fault tolerance
# for leases are warnings (docs/providers/*.md, "Running it as a cluster");
# the blocks after them are the same stores set up safely.
provider "sql" "pg_any" {
  driver = "postgres"
  dsn    = "host=db1,db2 port=5432,5432 user=electd dbname=electd" # WARNING: Several hosts without target_session_attrs
}

provider "sql" "pg_url" {
  driver = "postgres"
  dsn    = "postgres://electd@db1:5432,db2:5432/electd?target_session_attrs=prefer-standby" # WARNING: Several hosts without target_session_attrs
}

provider "etcd" "two" {
  endpoints = ["10.0.0.1:2379", "10.0.0.2:2379"] # WARNING: Two members: no fault tolerance
}

provider "zookeeper" "two" {
  servers = ["10.0.0.1:2181", "10.0.0.2:2181"] # WARNING: Two servers: no fault tolerance
}

provider "nats" "two" { # WARNING: One replica on a cluster
  servers = ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222"] # WARNING: Two servers: no fault tolerance
}

provider "nats" "r1" {
  servers  = ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222", "nats://10.0.0.3:4222"]
  replicas = 1 # WARNING: One replica on a cluster
}

provider "sql" "pg_rw" {
  driver = "postgres"
  dsn    = "host=db1,db2 port=5432,5432 user=electd dbname=electd target_session_attrs=read-write"
}

provider "sql" "pg_primary" {
  driver = "postgres"
  dsn    = "postgres://electd@db1:5432,db2:5432/electd?target_session_attrs=primary"
}

provider "sql" "pg_one" {
  driver = "postgres"
  dsn    = "host=db1 port=5432 user=electd dbname=electd sslmode=prefer"
}

provider "etcd" "three" {
  endpoints = ["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"]
}

provider "zookeeper" "three" {
  servers = ["10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"]
}

provider "nats" "r3" {
  servers  = ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222", "nats://10.0.0.3:4222"]
  replicas = 3
}

provider "etcd" "one" {
  endpoints = ["10.0.0.1:2379"]
}

provider "nats" "one" {
  servers = ["nats://10.0.0.1:4222"]
}

job "consumer" {
  provider = sql.pg_rw
  run { command = ["consume"] }
}

# A job whose renewal window is shorter than the cluster's own failover: a
# renewal due as etcd elects a new leader may wait 1.37 s of the 2 s.
job "fast" {
  provider     = etcd.three
  ttl          = "3s" # WARNING: Term shorter than the store's failover
  renew_every  = "500ms"
  run {
    command      = ["consume"]
    stop_timeout = "1s"
  }
}

# The same on one etcd server, and with a longer ttl on the cluster: no
# warning.
job "fast_single" {
  provider    = etcd.one
  ttl         = "3s"
  renew_every = "500ms"
  run {
    command      = ["consume"]
    stop_timeout = "1s"
  }
}

job "safe" {
  provider = etcd.three
  ttl      = "15s"
  run { command = ["consume"] }
}
