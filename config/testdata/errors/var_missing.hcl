variable "queue_url" { # ERROR: No value for required variable
  type = string
}
job "consumer" {
  run {
    command = ["/bin/consumer", var.queue_url]
  }
}
