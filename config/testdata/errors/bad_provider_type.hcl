provider "consul" "c" { # ERROR: Unknown provider type
  address = "127.0.0.1:8500"
}
