job "a" {
  on_elected {
    shell { command = "x" } # ERROR: Unsupported block type
  }
}
