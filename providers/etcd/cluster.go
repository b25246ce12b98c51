package etcd

// twoMembers is the warning for an endpoints list of two
// (docs/providers/etcd.md, "Running it as a cluster").
const twoMembers = "Two etcd members have no fault tolerance: a quorum of two is both, so losing either one stops every renewal and election. Run three or five members, and list every one of them in endpoints so that the client can move to another when one is lost."

// distinctCount is how many different entries xs has.
func distinctCount(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}
