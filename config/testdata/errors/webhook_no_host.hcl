job "a" {
  on_elected {
    webhook { url = "https:///hook" } # ERROR: Invalid webhook URL
  }
}
