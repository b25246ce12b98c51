provider "etcd" "e" { endpoints = ["127.0.0.1:2379"] }

job "nightly-report" {
  mode = "lock"
  task {
    schedule     = "30 2 * * *"
    command      = ["/usr/local/bin/report", "--date", event.time]
    timeout      = "10m"
    stop_signal  = "SIGQUIT"
    stop_timeout = "2s"
  }
}

job "every-minute" {
  task {
    schedule     = "@every 1m"
    command      = ["/bin/true"]
    random_delay = "20s"
  }
  on_task_failed {
    exec { command = ["page", "${event.job} ${event.result} ${event.exit_code} ${event.slot}"] }
  }
  on_task_succeeded {
    webhook { url = "https://hooks.example/ok" }
  }
}

job "hooks-only" {
  on_leader_change {
    exec { command = split(" ", "logger new leader ${event.leader}") }
  }
}
