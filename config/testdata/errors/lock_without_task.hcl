job "a" {
  mode = "lock" # ERROR: Lock mode needs a task
  run { command = ["x"] }
}
