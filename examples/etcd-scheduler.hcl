# A cluster-wide scheduler on etcd, which operators often already run for
# consensus. The fencing token is an etcd revision: it only grows.

provider "etcd" "main" {
  endpoints = ["127.0.0.1:2379"]
  prefix    = "/electd/"
}

job "cleanup" {
  task {
    schedule = "*/15 * * * *"
    command  = ["/usr/local/bin/cleanup", "--older-than", "7d"]
    timeout  = "5m"
  }
}

job "scheduler" {
  run {
    command = ["/usr/local/bin/scheduler", "--fencing-token", "${event.token}"]
  }
}
