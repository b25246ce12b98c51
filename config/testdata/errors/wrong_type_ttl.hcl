job "a" {
  ttl = ["30s"] # ERROR: Incorrect attribute value type
}
