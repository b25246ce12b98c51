provider "datastore" "d" {
  project_id = "p"
  namespace  = "no spaces allowed" # ERROR: Invalid namespace
  kind       = "__kind__"          # ERROR: Invalid kind
}

job "j" {}
