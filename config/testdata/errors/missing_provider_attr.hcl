provider "sql" "main" { # ERROR: Missing required argument
  driver = "sqlite"
}
provider "datastore" "d" { # ERROR: Missing required argument
  kind = "K"
}
provider "mongodb" "m" { # ERROR: Missing required argument
}
job "a" { provider = sql.main }
