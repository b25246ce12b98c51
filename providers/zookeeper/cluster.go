package zookeeper

// twoServers is the warning for a servers list of two
// (docs/providers/zookeeper.md, "Running it as a cluster").
const twoServers = "Two ZooKeeper servers have no fault tolerance: a quorum of two is both, so losing either one stops every session and election. Run an ensemble of three or five, and list every server so that the client can move to another when one is lost."

// distinctCount is how many different entries xs has.
func distinctCount(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}
