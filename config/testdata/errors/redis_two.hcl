provider "redis" "r" {
  addresses = ["r1:6379", "r2:6379"] # ERROR: Invalid number of addresses
}
