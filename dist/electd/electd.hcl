# electd reads every *.hcl and *.hcl.json file of /etc/electd. Every node that
# may run the work needs the same files (configuration management, a package
# of your own...).
#
# As installed, this file declares no job: the agent starts, serves its API on
# 127.0.0.1:8790 and runs nothing until you declare a job, for example:
#
#   provider "sql" "main" {
#     driver = "postgres"
#     dsn    = env("ELECTD_PG_DSN") # set in /etc/default/electd
#   }
#
#   job "billing-sync" {
#     provider = sql.main
#     run {
#       command = ["/usr/local/bin/billing-sync", "--fencing-token", "${event.token}"]
#     }
#   }
#
# then `electd check` and `systemctl reload electd`.
#
# Without a provider block, jobs use the embedded SQLite default, a file in
# /var/lib/electd: it elects only among agents on this one machine. For several
# machines declare a shared store. One example per store is in
# /usr/local/share/doc/electd/examples/, and every block and attribute is
# described in /usr/local/share/doc/electd/docs/configuration.md.
