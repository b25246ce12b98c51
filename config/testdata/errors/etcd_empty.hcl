provider "etcd" "e" {
  endpoints    = [] # ERROR: Empty endpoints
  dial_timeout = "soon" # ERROR: Invalid duration
}
