job "a" {
  ttl = # ERROR: Invalid expression
}
