job "a" {
  for_each = toset([event.node]) # ERROR: Variables not allowed
}
job "b" {
  for_each = toset([each.key]) # ERROR: Reference to "each" without for_each
}
job "c" {
  for_each = var.shards # ERROR: Reference to undeclared input variable
}
job "d" {
  for_each = local.regions # ERROR: Reference to undeclared local value
}
job "e" {
  ttl = each.value # ERROR: Reference to "each" without for_each
}
job "f" {
  for_each = toset(["x"])
  ttl      = each.values # ERROR: Unsupported attribute
}
