package mongodb_test

import (
	"os"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers/providertest"
)

// pollEvery is how often the waiting candidate retries in the handover
// measurement (the provider has no Notifier).
const pollEvery = 100 * time.Millisecond

// TestHandover measures a graceful handover: the candidate polls Acquire
// every 100 ms (no Notifier). Against FerretDB, or the real MongoDB named by
// ELECTD_TEST_MONGODB_URI when it is set.
//
//	go test -count=1 -run TestHandover -v ./providers/mongodb/
func TestHandover(t *testing.T) {
	t.Parallel()
	uri := os.Getenv(realMongoEnv)
	if uri == "" {
		uri, _ = teststore.StartFerretDB(t)
	}
	s := reach(t, uri)
	open := s.factory(false)(t)
	holder, candidate := open(t), open(t)
	defer holder.Close()
	defer candidate.Close()
	providertest.Handover(t, holder, candidate, providertest.HandoverOptions{Rounds: 30, Target: 300 * time.Millisecond})
}
