job "a" {}
job "a" {} # ERROR: Duplicate job
