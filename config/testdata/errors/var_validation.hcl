variable "queue_url" {
  type    = string
  default = "http://queue.internal/orders" # ERROR: Invalid value for variable
  validation {
    condition     = startswith(var.queue_url, "amqp://")
    error_message = "The queue_url must be an amqp:// URL."
  }
}
variable "shards" {
  type    = number
  default = 4
  validation {
    condition     = var.shards # ERROR: Invalid validation condition
    error_message = "Never shown."
  }
  validation {
    condition     = var.shards > local.max # ERROR: Local values not allowed
    error_message = "Never shown."
  }
}
job "consumer" {
  run {
    command = ["/bin/consumer", var.queue_url]
  }
}
