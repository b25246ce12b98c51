job "a" {
  run {
    command = ["x", vars.thing] # ERROR: Unknown variable
  }
}
