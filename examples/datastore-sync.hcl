# Google Cloud Datastore: one entity per job, updated in transactions.
# Credentials come from the application default (or credentials_file).

provider "datastore" "gcp" {
  project_id = "my-project"
  namespace  = "electd"
  kind       = "ElectdLease"
}

job "catalog-sync" {
  task {
    schedule = "@hourly"
    command  = ["/usr/local/bin/catalog-sync"]
    timeout  = "30m"
  }
}
