variable "shards" {
  type = number
}
job "consumer" {
  for_each = toset(range(var.shards))
  run {
    command = ["/bin/consumer", each.key]
  }
}
