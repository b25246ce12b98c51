region = "eu" # ERROR: Unsupported argument
