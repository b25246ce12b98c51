job "both" {
  health {
    command = ["/bin/true"]
    http    = "http://127.0.0.1:8080/healthz" # ERROR: Conflicting health checks
  }
}

job "neither" {
  health { # ERROR: Missing health check
    interval = "5s"
  }
}

job "bad-url" {
  health {
    http = "ftp://example.com/ready" # ERROR: Invalid health URL
  }
}

job "timing" {
  health {
    command  = ["/bin/true"]
    interval = "1s"
    timeout  = "2s" # ERROR: Invalid timeout
  }
}

job "counts" {
  health {
    command   = ["/bin/true"]
    failures  = 0 # ERROR: Invalid failures
    successes = -1 # ERROR: Invalid successes
  }
}

job "zero" {
  health {
    command  = ["/bin/true"]
    interval = "0s" # ERROR: Invalid interval
  }
}

job "http-env" {
  health {
    http = "http://127.0.0.1:8080/healthz"
    env  = { A = "b" } # ERROR: Unexpected env
  }
}

job "twice" {
  health {
    command = ["/bin/true"]
  }
  health { # ERROR: Duplicate health block
    command = ["/bin/true"]
  }
}

job "empty" {
  health {
    command = [] # ERROR: Empty command
  }
}
