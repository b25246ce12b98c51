package nats

// The warnings of a cluster's settings (docs/providers/nats.md, "Running
// it as a cluster").
const (
	twoServers = "Two NATS servers have no fault tolerance: JetStream's quorum of two is both, so losing either one stops every write to the bucket. Run three or five servers, and list every one of them in servers so that the client can move to another when one is lost."
	oneReplica = "With several servers and replicas = 1, the bucket electd creates lives on one server only: losing that server loses the leases and stops every election until it is back. Set replicas = 3 (an existing bucket keeps its own replicas: see nats kv info)."
)

// distinctCount is how many different entries xs has.
func distinctCount(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}
