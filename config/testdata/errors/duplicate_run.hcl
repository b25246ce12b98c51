job "a" {
  run { command = ["x"] }
  run { command = ["y"] } # ERROR: Duplicate run block
}
