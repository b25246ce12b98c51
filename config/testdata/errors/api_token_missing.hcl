agent {
  listen = "0.0.0.0:8790" # ERROR: Missing api_token
}
