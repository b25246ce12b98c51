package etcd

import (
	"testing"
	"time"

	"github.com/electd/electd/providers/providertest"
)

// testHandover measures a graceful handover as the agent sees it: the
// candidate, refused before, waits on Notify and acquires when told.
//
//	go test -count=1 -v -run 'TestEtcd/Handover' ./providers/etcd/
func testHandover(t *testing.T, endpoint string) {
	s := Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)}
	a, b := open(t, s), open(t, s)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond})
}
