agent {
  tags = { # ERROR: Too many tags
    aaaaaaaaaaaaaaaaaaaa = "0123456789012345678901234567890123456789"
    bbbbbbbbbbbbbbbbbbbb = "0123456789012345678901234567890123456789"
    cccccccccccccccccccc = "0123456789012345678901234567890123456789"
  }
  balance = "maybe" # ERROR: Incorrect attribute value type
}
