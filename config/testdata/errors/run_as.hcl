# A job's user, group and umask. The fixtures load as an agent that cannot
# switch users (TestLoadErrors): root exists everywhere, and is refused.
job "unknown-user" {
  user = "electd-no-such-user" # ERROR: Unknown user
  run { command = ["x"] }
}
job "unknown-group" {
  group = "electd-no-such-group" # ERROR: Unknown group
  run { command = ["x"] }
}
job "bad-umask" {
  umask = "0999" # ERROR: Invalid umask
  run { command = ["x"] }
}
job "cannot-switch" {
  user = "root" # ERROR: Cannot switch users
  run { command = ["x"] }
}
job "cannot-switch-group" {
  group = "root" # ERROR: Cannot switch users
  umask = "0027"
  run { command = ["x"] }
}
