# No provider at all: jobs use the embedded default (sql.default, SQLite).
job "quickstart" {
  run {
    command = ["sleep", "infinity"]
  }
}
