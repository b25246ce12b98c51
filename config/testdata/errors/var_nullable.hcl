variable "queue_url" {
  type     = string
  nullable = false
  default  = null # ERROR: Invalid default value for variable
}
variable "region" {
  type     = string
  nullable = "sometimes" # ERROR: Incorrect attribute value type
  default  = "eu"
}
job "consumer" {
  run {
    command = ["/bin/consumer", var.queue_url, var.region]
  }
}
