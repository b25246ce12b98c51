provider "sqll" "s" { # ERROR: Unknown provider type
  dsn = "x"
}
job "a" {
}
