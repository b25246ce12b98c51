job "report" {
  task {
    schedule     = "@every 10m"
    command      = ["report"]
    random_delay = "10m" # ERROR: Invalid random_delay
  }
}
