# Every provider attribute set.
provider "sql" "my" {
  driver = "mysql"
  dsn    = "user:pw@tcp(db:3306)/electd"
  table  = "Leases_2"
}
provider "redis" "r" {
  addresses = ["10.0.0.1:6379"]
  username  = "electd"
  password  = "pw"
  db        = 3
  tls       = true
  prefix    = "x:"
}
provider "mongodb" "m" {
  uri           = "mongodb://db"
  database      = "db1"
  collection    = "c1"
  write_concern = "1"
}
provider "azure_blob" "a" {
  connection_string = "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=a2V5;EndpointSuffix=core.windows.net"
  container         = "cc1"
}
provider "datastore" "d" {
  project_id       = "p"
  namespace        = "ns"
  kind             = "K"
  credentials_file = "testdata/valid/creds.json"
}
provider "etcd" "e" {
  endpoints    = ["e1:2379"]
  prefix       = "/x/"
  username     = "u"
  password     = "p"
  dial_timeout = "2s"
}
