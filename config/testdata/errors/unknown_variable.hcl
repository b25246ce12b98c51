job "a" {
  run {
    command = ["x", var.thing] # ERROR: Unknown variable
  }
}
