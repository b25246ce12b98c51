package agent

import (
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/repeats"
	"github.com/electd/electd/providers"
)

// A store that fails (an outage, a lost network) fails every job on it at
// each retry: the loop logs it as the store's, once, then in summaries at
// growing intervals, and once when it answers again (internal/repeats),
// instead of a line per job per retry_every. The jobs' status says since
// when the store has not answered (StoreUnreachableSince), which /healthz
// and `electd status` show apart from a loop that is stuck (Wedged).

// storeFailures is what the loop's log says about its store's failures.
var storeFailures = repeats.Kind{
	First:     "cannot reach the store",
	Still:     "store still unreachable",
	Recovered: "store reachable again",
	Key:       "provider",
}

// opDone records the outcome of a lease operation (status.opDone) and logs
// a failure through the loop's store log: an answer (a lease, "held",
// "lost") ends a run of failures, an error or a timeout is one.
func (j *job) opDone(err error) {
	j.status.opDone(err)
	_, once := j.policy.(*oneShot)
	fails := j.l.storeLog(once)
	if err != nil && !errors.Is(err, providers.ErrLost) {
		fails.Failed(j.l.ref, err, "job", j.spec.Name)
		return
	}
	fails.Succeeded(j.l.ref)
}

// storeLog is the loop's log of its store's failures, made on first use. A
// job of RunOnce (`electd lock`) logs them at Info: electd lock says the
// outcome itself.
func (l *loop) storeLog(once bool) *repeats.Log {
	if l.fails == nil {
		kind := storeFailures
		if once {
			kind.Level = hclog.Info
		}
		l.fails = repeats.New(l.log, l.clock.Now, kind)
	}
	return l.fails
}
