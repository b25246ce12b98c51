job "a" {
  provider = etcd.main # ERROR: Reference to undeclared provider
}
