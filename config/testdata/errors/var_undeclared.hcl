variable "queue_url" {
  default = "amqp://q"
}
variable "queue_url" { # ERROR: Duplicate variable declaration
  default = "amqp://r"
}
variable "2fast" { # ERROR: Invalid variable name
}
job "consumer" {
  run {
    command = ["/bin/consumer", var.queue_uri] # ERROR: Reference to undeclared input variable
  }
}
