package agent

import (
	"errors"
	"time"

	"github.com/electd/electd/internal/rlimit"
)

// A command that cannot start because this node is short of a resource
// (too many open files, no memory, no process slot) is not one that cannot
// start on this node: the shortage may pass (a leak fixed, a limit
// raised, a burst over), and the job is not given away and held off as for
// a missing program. The leader keeps the lease and tries again, with a
// backoff; the shortage is logged as what it is and counted
// (electd_resource_errors_total).

// maxShortBackoff caps the wait between tries to start a command on a node
// short of resources.
const maxShortBackoff = 30 * time.Second

func shortOfResources(err error) bool { return errors.Is(err, rlimit.ErrShortOfResources) }

// retryShort schedules another start of the run command after a start
// that failed for lack of a resource.
func (w *leaderWork) retryShort(err error) error {
	d := w.j.runner.shortBackoff(w.j.spec.RetryEvery)
	w.j.log().Error("this node is short of resources: the run command could not start; keeping the lease and trying again",
		"in", d, "error", err)
	w.after(d, w.startRun)
	return nil
}

// shortBackoff is how long to wait before the next try after the n-th
// start in a row that failed for lack of a resource: base, doubled each
// time, at most maxShortBackoff.
func (r *runner) shortBackoff(base time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if base <= 0 {
		base = time.Second
	}
	d := base << min(r.shortInRow, 16)
	r.shortInRow++
	return min(d, maxShortBackoff)
}

// noteStart counts and logs a start that failed for lack of a resource,
// and resets the backoff after one that worked.
func (r *runner) noteStart(kind string, err error) {
	if err == nil {
		r.mu.Lock()
		r.shortInRow = 0
		r.mu.Unlock()
		return
	}
	if !shortOfResources(err) {
		return
	}
	name := "other"
	if errno, ok := rlimit.Errno(err); ok {
		name = rlimit.Name(errno)
	}
	if r.metrics != nil {
		r.metrics.ResourceErrors.WithLabelValues(r.job, name).Inc()
	}
	args := []any{"kind", kind, "errno", name, "error", err}
	if open, limit, ferr := rlimit.OpenFiles(); ferr == nil {
		args = append(args, "open_files", open, "open_files_limit", limit)
	}
	r.log.Error("this node is short of resources: a command could not start", args...)
}
