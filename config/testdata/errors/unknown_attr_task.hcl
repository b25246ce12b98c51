job "a" {
  task {
    schedule = "@hourly"
    command  = ["x"]
    restart  = "always" # ERROR: Unsupported argument
  }
}
