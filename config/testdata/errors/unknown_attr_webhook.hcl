job "a" {
  on_demoted {
    webhook {
      url    = "https://example.com/hook"
      method = "PUT" # ERROR: Unsupported argument
    }
  }
}
