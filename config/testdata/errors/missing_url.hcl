job "a" {
  on_elected {
    webhook { # ERROR: Missing required argument
      body = "{}"
    }
  }
}
