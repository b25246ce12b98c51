provider "redis" "q" {
  addresses = ["10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"] # WARNING: Redlock is not a safe fence
}

job "consumer" {
  run { command = ["consume"] }
}
