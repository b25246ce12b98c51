# env: AZURE_STORAGE_CONNECTION_STRING
#
# Azure's leader-election pattern: leadership is a blob lease (15 to 60
# seconds), renewed by the leader.

provider "azure_blob" "leases" {
  connection_string = env("AZURE_STORAGE_CONNECTION_STRING")
  container         = "electd-leases"
}

job "invoice-exporter" {
  ttl         = "30s"
  renew_every = "8s"

  run {
    command      = ["/usr/local/bin/invoice-exporter"]
    stop_timeout = "5s"
  }
}
