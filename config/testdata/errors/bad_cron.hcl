job "a" {
  task {
    schedule = "61 * * * *" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "b" {
  task {
    schedule = "@every banana" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
