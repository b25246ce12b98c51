provider "redis" "r" {
  addresses = "r1:6379" # ERROR: Incorrect attribute value type
}
