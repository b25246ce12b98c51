agent {
  node = "n1" # ERROR: Unsupported argument
}
