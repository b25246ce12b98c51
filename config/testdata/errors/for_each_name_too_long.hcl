provider "sql" "s" {
  driver = "sqlite"
  dsn    = "leases.db"
}
job "consumer" { # ERROR: Instance name too long
  for_each = toset(["eu", "${join("", [for i in range(250) : "x"])}"])
}
