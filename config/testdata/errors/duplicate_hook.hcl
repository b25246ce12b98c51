job "a" {
  on_elected {
    exec { command = ["x"] }
  }
  on_elected { # ERROR: Duplicate hook block
    exec { command = ["y"] }
  }
}
