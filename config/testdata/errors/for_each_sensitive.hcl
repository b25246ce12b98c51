variable "tenants" {
  type      = set(string)
  default   = ["acme-corp", "globex"]
  sensitive = true
}
job "consumer" {
  for_each = var.tenants # ERROR: Invalid for_each argument
}
