provider "azure_blob" "a" { # ERROR: Missing required argument
  container = "leases"
}
