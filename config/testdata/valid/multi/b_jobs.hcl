job "one" {
  run { command = ["one"] }
}
