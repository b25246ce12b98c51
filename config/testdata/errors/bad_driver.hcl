provider "sql" "main" {
  driver = "oracle" # ERROR: Invalid driver
  dsn    = "x"
}
