# env: AZURE_STORAGE_CONNECTION_STRING
#
# Azure's leader-election pattern: leadership is a lease on the blob
# electd-leases/invoice-exporter, renewed by the leader. Azure leases last 15
# to 60 whole seconds, so the ttl must be in that range. Azure cannot notify
# waiting nodes: they poll every retry_every, which bounds a graceful
# handover. See docs/providers/azure_blob.md.

provider "azure_blob" "leases" {
  connection_string = env("AZURE_STORAGE_CONNECTION_STRING")
  container         = "electd-leases"

  # Without a secret, on a VM or pod with a managed or workload identity
  # that has "Storage Blob Data Contributor" on the container:
  #   account_url = "https://ACCOUNT.blob.core.windows.net/"
}

job "invoice-exporter" {
  ttl         = "30s"
  renew_every = "8s"
  retry_every = "2s"

  run {
    # The fencing token lets the exporter refuse to write after a newer
    # leader has started (a paused VM that wakes up late).
    command      = ["/usr/local/bin/invoice-exporter", "--fencing-token", "${event.token}"]
    stop_timeout = "5s"
  }
}
