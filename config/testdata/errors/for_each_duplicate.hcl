job "consumer" {
  for_each = toset(["eu", "us"])
  run {
    command = ["/bin/consumer", each.key]
  }
}
job "consumer.eu" { # ERROR: Duplicate job
  run {
    command = ["/bin/consumer", "eu"]
  }
}
job "a.b" {
  for_each = toset(["c"])
}
job "a" { # ERROR: Duplicate job
  for_each = toset(["b.c", "d"])
}
