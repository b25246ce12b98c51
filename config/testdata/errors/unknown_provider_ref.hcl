provider "sql" "main" {
  driver = "sqlite"
  dsn    = "x.db"
}
job "a" {
  provider = sql.mian # ERROR: Reference to undeclared provider
}
