provider "sql" "main" {
  driver = "postgres"
  dsn    = "postgres://db/electd"
  host   = "db" # ERROR: Unsupported argument
}
provider "redis" "r" {
  addresses = ["r:6379"]
  database  = 2 # ERROR: Unsupported argument
}
job "a" { provider = sql.main }
