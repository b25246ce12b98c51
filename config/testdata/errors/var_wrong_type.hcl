variable "shards" {
  type    = number
  default = "sixteen" # ERROR: Invalid default value for variable
}
variable "regions" {
  type    = map(string)
  default = ["eu", "us"] # ERROR: Invalid default value for variable
}
variable "zone" {
  type = strin # ERROR: Invalid type specification
}
job "consumer" {
  run {
    command = ["/bin/consumer", tostring(var.shards)]
  }
}
