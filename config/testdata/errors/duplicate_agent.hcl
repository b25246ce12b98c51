agent { node_id = "a" }
agent { node_id = "b" } # ERROR: Duplicate agent block
