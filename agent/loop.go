package agent

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/internal/repeats"
	"github.com/electd/electd/metrics"
	"github.com/electd/electd/providers"
)

// A loop runs every job of one provider on one goroutine. It is what makes a
// job cost a small struct rather than goroutines and timers of its own:
//
//   - events (a store's answer, a child's exit, an API request, a
//     notification) are functions posted to the loop and run on it in order,
//     so a job's fields are only ever touched by the loop;
//   - the jobs' timers live in one heap, on the agent's Clock;
//   - the store requests that fall due in one turn of the loop go out
//     together: one AcquireMany, RenewMany or ReleaseMany per turn where the
//     store can batch (renewals meet on a shared grid, see align), single
//     requests from at most maxInflight workers per turn where it cannot.
//
// term.go and election.go hold what a job does with these; this file holds only the
// machinery.
type loop struct {
	prov    providers.Provider
	ref     string // the provider's reference, for metrics
	clock   Clock
	metrics *metrics.Metrics
	log     hclog.Logger      // the agent's: each job adds its name (job.log)
	batch   providers.Batcher // nil when the store cannot batch
	base    time.Time         // origin of the renewal grid
	fails   *repeats.Log      // the store's failures, logged once and summarised (storefail.go)

	mu    sync.Mutex
	queue []func()
	wake  chan struct{}
	ctx   context.Context // ends with stop
	stop  context.CancelFunc
	done  chan struct{}

	fleet   *fleet   // this node's tags, balance and drain (fleet.go)
	members *members // nil when no job here needs to know the other agents

	// lateRenewals counts the renewal answers that came after their term
	// had ended, and were ignored (tests wait on it).
	lateRenewals atomic.Int64
	// notifying: the store's notifications flow (notify subscribed), so a
	// release reaches the candidates without their polling for it.
	notifying atomic.Bool

	// Owned by the loop's goroutine.
	leading  int // leader-mode jobs leading now
	timers   timerHeap
	jobs     map[string]*job // by lease key, for notifications
	placed   placed          // the jobs that placement looks at one by one (fleet.go)
	acquires []acquireOp
	renews   []renewOp
	releases []releaseOp
}

const (
	// maxBatch bounds the leases of one batched request.
	maxBatch = 1000
	// maxInflight bounds the single requests in flight at once, per store.
	maxInflight = 64
)

func newLoop(prov providers.Provider, ref string, clock Clock, m *metrics.Metrics, f *fleet, log hclog.Logger) *loop {
	ctx, stop := context.WithCancel(context.Background())
	l := &loop{prov: prov, ref: ref, clock: clock, metrics: m, log: log, base: clock.Now(), fleet: f,
		wake: make(chan struct{}, 1), ctx: ctx, stop: stop, done: make(chan struct{}), jobs: map[string]*job{}}
	l.batch, _ = providers.As[providers.Batcher](prov)
	go l.run()
	return l
}

// notify subscribes to the store's notifications, when it has them: a
// candidate then tries the moment a lease is released, not on its next
// timer. An error means the loop relies on timers alone.
func (l *loop) notify() error {
	n, ok := providers.As[providers.Notifier](l.prov)
	if !ok {
		return nil
	}
	err := n.Notify(l.ctx, func(key string) {
		l.post(func() {
			if key == "" {
				for _, j := range l.jobs {
					j.notify()
					j.taskNotified()
					j.triggerNotified()
				}
			} else if j := l.jobs[key]; j != nil {
				j.notify()
				j.taskNotified()
			} else if name, ok := strings.CutPrefix(key, triggerPrefix); ok && l.jobs[name] != nil {
				l.jobs[name].triggerNotified() // a run was asked for (task.go)
			}
		})
	})
	l.notifying.Store(err == nil)
	return err
}

// post runs fn on the loop. It never blocks.
func (l *loop) post(fn func()) {
	l.mu.Lock()
	l.queue = append(l.queue, fn)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// close ends the loop; the caller has ended its jobs.
func (l *loop) close() {
	l.stop()
	<-l.done
	if l.members != nil {
		<-l.members.done // its record released
	}
}

func (l *loop) run() {
	defer close(l.done)
	// One alarm, always at the earliest timer: a timer cancelled or moved
	// later (a renewal's answer replacing its step-down timer) leaves no
	// wake-up behind.
	var alarm Timer
	var alarmAt time.Time
	defer func() {
		if alarm != nil {
			alarm.Stop()
		}
	}()
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, fn := range q {
			fn()
		}
		now := l.clock.Now()
		for len(l.timers) > 0 && !l.timers[0].at.After(now) {
			t := heap.Pop(&l.timers).(*timer)
			t.fn()
		}
		l.flush()
		if alarm != nil && (len(l.timers) == 0 || !l.timers[0].at.Equal(alarmAt)) {
			alarm.Stop()
			alarm = nil
		}
		var ring <-chan time.Time
		if len(l.timers) > 0 {
			if alarm == nil {
				alarmAt = l.timers[0].at
				alarm = l.clock.NewTimer(alarmAt.Sub(now))
			}
			ring = alarm.C()
		}
		select {
		case <-l.wake:
		case <-ring:
			alarm = nil
		case <-l.ctx.Done():
			return
		}
	}
}

// Timers.

type timer struct {
	at time.Time
	fn func()
	i  int // index in the heap; -1 once fired or stopped
}

type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, k int) bool { return h[i].at.Before(h[k].at) }
func (h timerHeap) Swap(i, k int)      { h[i], h[k] = h[k], h[i]; h[i].i = i; h[k].i = k }
func (h *timerHeap) Push(x any)        { t := x.(*timer); t.i = len(*h); *h = append(*h, t) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.i = -1
	return t
}

// at runs fn on the loop at t (at once when t has passed).
func (l *loop) at(t time.Time, fn func()) *timer {
	tm := &timer{at: t, fn: fn}
	heap.Push(&l.timers, tm)
	return tm
}

func (l *loop) after(d time.Duration, fn func()) *timer { return l.at(l.clock.Now().Add(d), fn) }

// cancel stops t if it has not fired. A nil t is allowed.
func (l *loop) cancel(t *timer) {
	if t != nil && t.i >= 0 {
		heap.Remove(&l.timers, t.i)
		t.i = -1
	}
}

// align moves a renewal due at t back to the grid point at or before it, so
// that the renewals of all the loop's jobs meet in one batch per
// renew_every. A renewal only ever moves earlier: a job renews a little more
// often, never less.
func (l *loop) align(t, now time.Time, renewEvery time.Duration) time.Time {
	if l.batch == nil {
		return t
	}
	grid := max(renewEvery, 50*time.Millisecond)
	a := l.base.Add(t.Sub(l.base) / grid * grid)
	if a.Before(now) {
		return t
	}
	return a
}

// Store requests. Each is queued during a turn and sent at its end; its
// answer is posted back to the loop. timeout bounds the request in real
// time (a batch takes the shortest of its requests').

type acquireOp struct {
	req     providers.AcquireRequest
	timeout time.Duration
	done    func(providers.Lease, error)
}

type renewOp struct {
	lease   providers.Lease
	timeout time.Duration
	done    func(providers.Lease, error)
}

type releaseOp struct {
	lease   providers.Lease
	timeout time.Duration
	done    func(error)
}

func (l *loop) acquire(op acquireOp) { l.acquires = append(l.acquires, op) }
func (l *loop) renew(op renewOp)     { l.renews = append(l.renews, op) }
func (l *loop) release(op releaseOp) { l.releases = append(l.releases, op) }

// observe asks for a lease's record on its own: only candidates holding off
// do, which is rare.
func (l *loop) observe(key string, timeout time.Duration, done func(providers.Lease, error)) {
	go func() {
		ctx, cancel := context.WithTimeout(l.ctx, timeout)
		defer cancel()
		lease, err := l.prov.Observe(ctx, key)
		l.post(func() { done(lease, err) })
	}()
}

func (l *loop) flush() {
	if ops := l.acquires; len(ops) > 0 {
		l.acquires = nil
		send(l, "acquire_batch", ops, l.batch != nil, func(o acquireOp) time.Duration { return o.timeout },
			func(ctx context.Context, o acquireOp) func() {
				lease, err := l.prov.Acquire(ctx, o.req)
				err = overdue(ctx, err)
				return func() { o.done(lease, err) }
			},
			func(ctx context.Context, ops []acquireOp) (func(), error) {
				reqs := make([]providers.AcquireRequest, len(ops))
				for i, o := range ops {
					reqs[i] = o.req
				}
				leases, errs := l.batch.AcquireMany(ctx, reqs)
				for i := range errs {
					errs[i] = overdue(ctx, errs[i])
				}
				return func() {
					for i, o := range ops {
						o.done(leases[i], errs[i])
					}
				}, storeError(errs, providers.ErrHeld)
			})
	}
	if ops := l.renews; len(ops) > 0 {
		l.renews = nil
		send(l, "renew_batch", ops, l.batch != nil, func(o renewOp) time.Duration { return o.timeout },
			func(ctx context.Context, o renewOp) func() {
				lease, err := l.prov.Renew(ctx, o.lease)
				err = overdue(ctx, err)
				return func() { o.done(lease, err) }
			},
			func(ctx context.Context, ops []renewOp) (func(), error) {
				in := make([]providers.Lease, len(ops))
				for i, o := range ops {
					in[i] = o.lease
				}
				leases, errs := l.batch.RenewMany(ctx, in)
				for i := range errs {
					errs[i] = overdue(ctx, errs[i])
				}
				return func() {
					for i, o := range ops {
						o.done(leases[i], errs[i])
					}
				}, storeError(errs, providers.ErrLost)
			})
	}
	if ops := l.releases; len(ops) > 0 {
		l.releases = nil
		send(l, "release_batch", ops, l.batch != nil, func(o releaseOp) time.Duration { return o.timeout },
			func(ctx context.Context, o releaseOp) func() {
				err := l.prov.Release(ctx, o.lease)
				return func() { o.done(err) }
			},
			func(ctx context.Context, ops []releaseOp) (func(), error) {
				in := make([]providers.Lease, len(ops))
				for i, o := range ops {
					in[i] = o.lease
				}
				errs := l.batch.ReleaseMany(ctx, in)
				return func() {
					for i, o := range ops {
						o.done(errs[i])
					}
				}, storeError(errs, providers.ErrLost)
			})
	}
}

// send sends ops: in batches of up to maxBatch when the store can batch
// them, or one by one from at most maxInflight workers. Each answer runs on the loop. Requests
// do not end with the loop: a release at shutdown must go out.
func send[T any](l *loop, op string, ops []T, batched bool, timeout func(T) time.Duration,
	one func(context.Context, T) func(), many func(context.Context, []T) (func(), error)) {
	if batched {
		for start := 0; start < len(ops); start += maxBatch {
			chunk := ops[start:min(start+maxBatch, len(ops))]
			d := timeout(chunk[0])
			for _, o := range chunk[1:] {
				d = min(d, timeout(o))
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				began := time.Now()
				answer, err := many(ctx, chunk)
				if l.metrics != nil {
					l.metrics.ObserveBatch(l.ref, op, began, err)
				}
				l.post(answer)
			}()
		}
		return
	}
	var next atomic.Int64
	for range min(len(ops), maxInflight) {
		go func() {
			for i := int(next.Add(1) - 1); i < len(ops); i = int(next.Add(1) - 1) {
				ctx, cancel := context.WithTimeout(context.Background(), timeout(ops[i]))
				answer := one(ctx, ops[i])
				cancel()
				l.post(answer)
			}
		}()
	}
}

// storeError is the first error of a batch that is not an answer about one
// lease (held, lost): the request's own failure, for the metrics.
func storeError(errs []error, answer error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, answer) {
			return err
		}
	}
	return nil
}

// overdue marks the error of a request whose deadline passed as
// context.DeadlineExceeded, which the job takes for a hung attempt to send
// again (term.go): some clients report their own I/O timeout, set from
// the context's deadline, or a closed connection instead.
func overdue(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, providers.ErrHeld) || errors.Is(err, providers.ErrLost) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}
