# comment kept
job "a" {
provider = sql.main
    ttl = "30s"
  renew_every="5s"
  run {
  command = ["x","y"]
  env = { A = "1", LONGER_NAME = "2" }
  }
}
