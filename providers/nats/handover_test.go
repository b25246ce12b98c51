package nats

import (
	"testing"
	"time"

	"github.com/electd/electd/providers/providertest"
)

// TestHandover measures a graceful handover: the candidate, refused before
// and waiting on Notify (a key-value watch), is notified and acquires.
//
//	go test -count=1 -run TestHandover -v ./providers/nats/
func TestHandover(t *testing.T) {
	t.Parallel()
	srv := machineServer(t)
	s := Settings{Servers: []string{srv}, Bucket: testBucket(t, srv)}
	a, b := open(t, s), open(t, s)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond})
}
