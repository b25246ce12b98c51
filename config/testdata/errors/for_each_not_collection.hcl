job "a" {
  for_each = "abc" # ERROR: Invalid for_each argument
}
job "b" {
  for_each = ["x", "y"] # ERROR: Invalid for_each argument
}
job "c" {
  for_each = null # ERROR: Invalid for_each argument
}
job "d" {
  for_each = toset([["x"]]) # ERROR: Invalid for_each argument
}
job "e" {
  for_each = toset(["eu west", "us/east"]) # ERROR: Invalid for_each argument
}
