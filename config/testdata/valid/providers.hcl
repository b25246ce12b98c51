# One provider of every type, each with the defaults left out, and a job on each.
provider "sql" "lite" {
  driver = "sqlite"
  dsn    = "/var/lib/electd/leases.db"
}
provider "redis" "r" {
  addresses = ["10.0.0.1:6379"]
}
provider "mongodb" "m" {
  uri = "mongodb://localhost:27017"
}
provider "azure_blob" "a" {
  account_url = "https://acct.blob.core.windows.net"
}
provider "datastore" "d" {
  project_id = "my-project"
}
provider "etcd" "e" {
  endpoints = ["127.0.0.1:2379", "127.0.0.2:2379"]
}

job "on-sql" { provider = sql.lite }
job "on-redis" { provider = redis.r }
job "on-mongodb" { provider = mongodb.m }
job "on-azure" { provider = azure_blob.a }
job "on-datastore" { provider = datastore.d }
job "on-etcd" { provider = etcd.e }
