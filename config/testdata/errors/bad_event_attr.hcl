job "a" {
  run {
    command = ["x", event.holder] # ERROR: Unsupported attribute
    env     = { T = "${event.tokens}" } # ERROR: Unsupported attribute
  }
}
