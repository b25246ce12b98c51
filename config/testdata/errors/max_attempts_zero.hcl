job "a" {
  on_elected {
    webhook {
      url          = "https://example.com/"
      max_attempts = 0 # ERROR: Invalid max_attempts
    }
  }
}
