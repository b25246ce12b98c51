agent {
  tags = { node = "other" } # ERROR: Reserved tag
}

job "a" {
  constraint = { "bad name" = "x" } # ERROR: Invalid tag name
}

job "b" {
  prefer = "eu" # ERROR: Incorrect attribute value type
}

job "c" {
  prefer_settle = "5s" # ERROR: prefer_settle without prefer
}

job "d" {
  prefer        = { zone = "eu" }
  prefer_settle = "soon" # ERROR: Invalid duration
}

job "e" {
  constraint = { zone = "line\nbreak" } # ERROR: Invalid tag value
}
