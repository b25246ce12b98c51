# Several problems in one file: all are reported in one run.
agent {
  log_level = "loud" # ERROR: Invalid log_level
}
job "a" {
  mode = "lock" # ERROR: Lock mode needs a task
  ttl  = "1x" # ERROR: Invalid duration
  on_elected {
    webhook { url = "mailto:ops@example.com" } # ERROR: Invalid webhook URL
  }
}
