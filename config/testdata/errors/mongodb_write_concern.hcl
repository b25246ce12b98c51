provider "mongodb" "m" {
  uri           = "mongodb://127.0.0.1:27017"
  write_concern = "0" # ERROR: Invalid write_concern
}

job "j" {}
