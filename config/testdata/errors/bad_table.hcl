provider "sql" "main" {
  driver = "sqlite"
  dsn    = "x.db"
  table  = "leases; DROP TABLE users" # ERROR: Invalid table name
}
