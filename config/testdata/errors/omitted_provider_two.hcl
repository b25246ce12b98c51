provider "sql" "a" {
  driver = "sqlite"
  dsn    = "a.db"
}
provider "sql" "b" {
  driver = "sqlite"
  dsn    = "b.db"
}
job "a" { # ERROR: Missing provider
}
