job "sync" {
  run { command = ["a"] }
}
