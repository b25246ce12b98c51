job "a" {
  retry_every = "0s" # ERROR: Invalid retry_every
}
