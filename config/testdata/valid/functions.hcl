provider "sql" "main" {
  driver = lower("SQLITE")
  dsn    = trimspace(file("dsn.txt"))
  table  = env("ELECTD_TEST_UNSET", "fallback_table")
}

job "fn" {
  ttl         = format("%ds", 20)
  renew_every = join("", ["5", "s"])
  run {
    command = concat(["a"], [for s in ["b", "c"] : upper(s)])
    env     = merge({ A = "1" }, { B = coalesce(null, "2") })
  }
}
