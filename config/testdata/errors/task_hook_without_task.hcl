job "api" {
  run {
    command = ["server"]
  }
  on_task_failed { # ERROR: Task hook without a task
    exec { command = ["page", "${event.job}"] }
  }
}
