provider "azure_blob" "a" {
  connection_string = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1"
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
