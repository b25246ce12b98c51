job "consumer" {
  for_each = { eu = "15s", us = "soon", ap = "15s" }
  ttl      = each.value # ERROR: Invalid duration
  run {
    command = each.key # ERROR: Incorrect attribute value type
  }
}
