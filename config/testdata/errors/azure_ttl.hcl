provider "azure_blob" "a" {
  connection_string = "UseDevelopmentStorage=true"
}

job "short" {
  ttl         = "10s" # ERROR: Invalid ttl for azure_blob
  renew_every = "3s"
}

job "long" {
  ttl         = "90s" # ERROR: Invalid ttl for azure_blob
  renew_every = "20s"
}

job "fraction" {
  ttl = "20500ms" # ERROR: Invalid ttl for azure_blob
}

job "default" {} # the default ttl, 15s, is within the range

job "max" {
  ttl         = "60s"
  renew_every = "15s"
}
