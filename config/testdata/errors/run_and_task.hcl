job "a" {
  run { command = ["x"] }
  task { # ERROR: Conflicting run and task
    schedule = "@hourly"
    command  = ["y"]
  }
}
