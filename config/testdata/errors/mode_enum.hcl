job "a" {
  mode = "follower" # ERROR: Invalid mode
}
