job "zero" {
  task {
    schedule = "@every 0s" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "negative" {
  task {
    schedule = "@every -5s" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "sub-second" {
  task {
    schedule = "@every 100ms" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "fraction" {
  task {
    schedule = "@every 1500ms" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
job "tz" {
  task {
    schedule = "TZ=UTC @every 999ms" # ERROR: Invalid schedule
    command  = ["x"]
  }
}
