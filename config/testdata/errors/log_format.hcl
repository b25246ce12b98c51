agent {
  log_format = "yaml" # ERROR: Invalid log_format
}
