locals {
  a = local.b # ERROR: Cycle in local values
  b = "${local.a}-x" # ERROR: Cycle in local values
  c = local.c # ERROR: Cycle in local values
  d = upper(local.a) # depends on the cycle: unknown, not reported again
  e = "fine"
}
locals {
  e = "again" # ERROR: Duplicate local value definition
}
job "consumer" {
  run {
    command = ["/bin/consumer", local.d, local.e]
  }
}
