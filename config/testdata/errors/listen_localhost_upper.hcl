agent {
  listen = "LOCALHOST:8790"
}
provider "sql" "s" {
  driver = "postgres"
  dsn    = "not a dsn" # ERROR: Invalid dsn
}
provider "sql" "l" {
  driver = "postgres"
  dsn    = "postgres://electd@db.example.com/electd"
  table  = "t_123456789012345678901234567890123456789012345678901234567" # ERROR: Table name too long for postgres
}
