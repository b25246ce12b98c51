# Google Cloud Datastore (Firestore in Datastore mode): one entity per job,
# read and written in one transaction per operation. The identity electd runs
# as needs roles/datastore.user on the project. Credentials come from the
# application default (the metadata server on GCE, GKE and Cloud Run,
# GOOGLE_APPLICATION_CREDENTIALS, or `gcloud auth application-default login`),
# or from credentials_file.
#
# Datastore has no server clock a transaction can read: expiry is judged on
# the nodes' own clocks, which must stay within 1s of each other (NTP or
# chrony does far better). See docs/providers/datastore.md.

provider "datastore" "gcp" {
  project_id = "my-project"
  namespace  = "electd"
  kind       = "ElectdLease"
  # credentials_file = "/etc/electd/datastore-key.json"
}

job "catalog-sync" {
  ttl         = "20s"
  renew_every = "5s"

  task {
    schedule     = "@hourly"
    command      = ["/usr/local/bin/catalog-sync", "--fencing-token", "${event.token}"]
    timeout      = "30m"
    stop_timeout = "5s"
  }
}
