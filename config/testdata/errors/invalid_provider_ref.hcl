provider "sql" "main" {
  driver = "sqlite"
  dsn    = "x.db"
}
job "a" {
  provider = "sql.main" # ERROR: Invalid provider reference
}
