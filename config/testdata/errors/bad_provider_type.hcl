provider "zookeeper" "zk" { # ERROR: Unknown provider type
  hosts = ["zk:2181"]
}
