// Package clusterfaults is the cluster fault suite (its tests; this file
// only names the package): each store runs as a cluster of three members,
// one per "host", and each host runs one `electd run` agent. Hosts are
// network namespaces joined by a bridge in a namespace of their own, so the
// machine's own network is never touched; partitions are iptables DROP
// rules inside a host's namespace, silent as a real one (no RST). The
// faults: kill -9 of the store's leader, isolating the leading agent's
// host, a bystander host, or the store leader's host, and healing. The
// checker reads the children's log (internal/cluster): overlapping terms,
// tokens that repeat or go back, leaderless gaps, and step-downs where none
// should be. docs/reliability.md gives the figures.
//
// It needs root (network namespaces, iptables) and skips without.
// Stores: etcd, ZooKeeper, NATS (a bucket with 3 replicas), Redlock
// (three independent Redis servers), and, with failovers instead of the
// faults above (failover_test.go), PostgreSQL (a primary and two
// streaming standbys, the agents on a multi-host read-write DSN) and
// Redis (a primary and two replicas behind an address that moves).
// `make test` runs the short form (one round of faults on etcd);
// `make test-clusters` runs the long form.
package clusterfaults
