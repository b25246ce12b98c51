job "a" {
  on_elected {
    webhook { url = "ftp://files.example.com/x" } # ERROR: Invalid webhook URL
  }
}
