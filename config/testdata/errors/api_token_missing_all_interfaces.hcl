agent {
  listen = ":8790" # ERROR: Missing api_token
}
