agent {
  shutdown_timeout = "0s" # ERROR: Invalid shutdown_timeout
}
