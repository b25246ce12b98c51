provider "redis" "q" {
  addresses = ["10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"]
}

job "consumer" {
  run { command = ["consume", "--token", event.token] }
}
