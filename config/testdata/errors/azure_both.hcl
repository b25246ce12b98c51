provider "azure_blob" "a" {
  connection_string = "DefaultEndpointsProtocol=https"
  account_url       = "https://x.blob.core.windows.net" # ERROR: Conflicting arguments
}
