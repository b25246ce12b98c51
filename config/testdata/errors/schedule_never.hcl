job "feb30" {
  task {
    schedule = "0 0 30 2 *" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "apr31" {
  mode = "lock"
  task {
    schedule = "15 4 31 4 *" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "nov31-tz" {
  task {
    schedule = "CRON_TZ=Europe/Paris 0 12 31 11 *" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
