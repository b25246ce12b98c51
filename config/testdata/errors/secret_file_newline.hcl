agent {
  listen    = "0.0.0.0:8790"
  api_token = file("../token_with_newline.txt") # ERROR: Invalid api_token
}
provider "sql" "s" {
  driver = "postgres"
  dsn    = file("../token_with_newline.txt") # ERROR: Invalid dsn
}
job "a" {
  on_elected {
    webhook {
      url    = "https://hooks.example.com/x"
      secret = file("../token_with_newline.txt") # ERROR: Invalid secret
    }
  }
}
