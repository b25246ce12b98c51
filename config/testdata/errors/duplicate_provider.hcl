provider "sql" "main" {
  driver = "sqlite"
  dsn    = "a.db"
}
provider "sql" "main" { # ERROR: Duplicate provider
  driver = "sqlite"
  dsn    = "b.db"
}
