locals {
  queue = "amqp://q"
}
job "consumer" {
  run {
    command = ["/bin/consumer", local.queues] # ERROR: Reference to undeclared local value
  }
}
