job "a" {
  ttl = event.ttl # ERROR: Variables not allowed
}
