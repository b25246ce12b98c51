agent {
  node_id = "n1"
}
provider "sql" "main" {
  driver = "sqlite"
  dsn    = "a.db"
}
