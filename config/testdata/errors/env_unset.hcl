provider "sql" "main" {
  driver = "postgres"
  dsn    = env("ELECTD_TEST_UNSET") # ERROR: Environment variable not set
}
job "a" {
  run {
    command = ["x", env("ELECTD_TEST_UNSET")] # ERROR: Environment variable not set
  }
}
