job "sync" { # ERROR: Duplicate job
  run { command = ["b"] }
}
