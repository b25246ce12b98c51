job "a" {
  on_elected {
    webhook {
      url    = "https://example.com/${event.job}"
      secret = event.token # ERROR: Variables not allowed
    }
  }
}
