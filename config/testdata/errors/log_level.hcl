agent {
  log_level = "verbose" # ERROR: Invalid log_level
}
