job "a" {
  lease_duration = "15s" # ERROR: Unsupported argument
}
