job "-leading-dash" {} # ERROR: Invalid job name
job "" {} # ERROR: Invalid job name
job "with space" {} # ERROR: Invalid job name
