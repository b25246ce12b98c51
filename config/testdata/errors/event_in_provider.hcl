provider "sql" "main" {
  driver = "sqlite"
  dsn    = "${event.job}.db" # ERROR: Variables not allowed
}
