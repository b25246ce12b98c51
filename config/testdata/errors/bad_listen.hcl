agent {
  listen = "8790" # ERROR: Invalid listen address
}
