provider "sql" "my-db" { # ERROR: Invalid provider name
  driver = "sqlite"
  dsn    = "x.db"
}
