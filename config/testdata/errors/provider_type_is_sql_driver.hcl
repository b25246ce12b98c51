# A newcomer names the database instead of the provider type "sql": the
# detail says what to write (config/load_test.go checks it).
provider "postgres" "main" { # ERROR: Unknown provider type
  dsn = "postgres://electd@db/electd"
}
