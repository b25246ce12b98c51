package azureblob_test

import (
	"testing"
	"time"

	"github.com/electd/electd/providers/providertest"
)

// TestHandover measures how long after a graceful Release a waiting
// candidate holds the lease. Azure cannot notify, so the candidate polls
// Acquire every 100 ms, as the agent does at retry_every = "100ms".
//
//	go test -count=1 -run TestHandover -v ./providers/azureblob/
func TestHandover(t *testing.T) {
	t.Parallel()
	_, s := onAzurite(t)
	a, b := newProvider(t, s), newProvider(t, s)
	providertest.Handover(t, a, b, providertest.HandoverOptions{Rounds: 100, TTL: ttl, Target: 300 * time.Millisecond})
}
