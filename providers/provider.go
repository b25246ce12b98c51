package providers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxValueLen bounds Lease.Value. The value is a small note that travels with
// the lease (the last task slot run); it is not a general key-value store.
const MaxValueLen = 256

// Sentinel errors, checked with errors.Is.
var (
	// ErrHeld: Acquire found the lease held by another holder. The concrete
	// error is a *HeldError naming that holder.
	ErrHeld = errors.New("providers: lease held by another holder")
	// ErrLost: Renew or Release found that the caller no longer holds the
	// lease (another holder took it, or it expired and was taken).
	ErrLost = errors.New("providers: lease lost")
)

// HeldError is returned by Acquire when another holder has the lease.
type HeldError struct {
	Key     string
	Holder  string
	Token   uint64
	Expires time.Time
	// Remaining is how long the holder's term had left when the store
	// answered, measured by the store's own clock (expires - now in one
	// statement, PTTL, ...): never a timestamp compared across clocks. A
	// candidate tries again once it has passed instead of polling. Zero
	// when the store cannot say (the caller then polls at retry_every).
	Remaining time.Duration
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("providers: lease %q held by %q (token %d)", e.Key, e.Holder, e.Token)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lease is one term of one holder on one key.
type Lease struct {
	Key    string
	Holder string
	// Token is the fencing token: it grows by one with every Acquire (a
	// returning holder included) and never decreases, across releases,
	// expiries and restarts.
	Token uint64
	// TTL is the term length asked for; Renew pushes the expiry out by TTL.
	TTL time.Duration
	// Expires is the store's view of the expiry (the store's clock where it
	// has one). It is informational: the agent's safety rule runs on its
	// own monotonic clock, never on this value.
	Expires time.Time
	// Value is carried with the lease across terms and holders. Acquire
	// returns the value left by the previous term; Renew and Release store
	// the Value of the lease they are given.
	Value string
}

// Provider is a lease store. Every method is safe for concurrent use.
//
//	Acquire succeeds when there is no record, the record expired (by the
//	store's clock), or req.Holder already holds it; every success starts a
//	new term with token = max(previous, req.Floor) + 1. Otherwise it
//	returns a *HeldError.
//	Renew succeeds when holder and token still match: expiry = now + TTL,
//	Value stored, token unchanged. Otherwise ErrLost.
//	Release succeeds when holder and token still match: holder cleared,
//	expiry now, token and Value kept, the record never deleted. Otherwise
//	ErrLost.
//	Observe returns the current record; Holder is "" when the lease is free
//	or expired. A key never acquired returns a zero Lease with Key set.
//
// A store that is down or slow returns an error (never a false success),
// and every call honours ctx.
type Provider interface {
	Acquire(ctx context.Context, req AcquireRequest) (Lease, error)
	Renew(ctx context.Context, lease Lease) (Lease, error)
	Release(ctx context.Context, lease Lease) error
	Observe(ctx context.Context, key string) (Lease, error)
	Close() error
}

// CheckValue reports whether v may be stored as a Lease.Value.
func CheckValue(v string) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("providers: lease value is %d bytes, more than %d", len(v), MaxValueLen)
	}
	return nil
}

// AcquireRequest is one lease asked for in an Acquire or AcquireMany.
type AcquireRequest struct {
	Key    string
	Holder string
	TTL    time.Duration
	// Floor is a token the new term's must be above, besides the store's
	// own counter: the highest token the caller has seen for the key (its
	// terms, the holders it observed or was refused by). A store that lost
	// writes (a failover to a replica that had not received them) would
	// otherwise count again from an older token and hand out one it had
	// handed out before. Zero: no floor.
	Floor uint64
}

// Batcher is an optional capability: acquiring, renewing and releasing
// many leases in one request to the store (or a handful), so that the
// store's load grows with the number of agents rather than of jobs, and an
// agent starting or stopping with thousands of jobs is done in a few round
// trips. A store that batches one of the three batches all three.
//
// Each item is judged exactly as the single operation judges it, on its
// own, and results are in the order given:
//
//	AcquireMany: the new lease, or its error (a *HeldError, or the
//	request's error for every item when the request as a whole failed).
//	RenewMany: the renewed lease, or its error (ErrLost for a lease no
//	longer held; the request's error for every lease when the request as
//	a whole failed).
//	ReleaseMany: nil, ErrLost or the request's error.
type Batcher interface {
	AcquireMany(ctx context.Context, reqs []AcquireRequest) ([]Lease, []error)
	RenewMany(ctx context.Context, leases []Lease) ([]Lease, []error)
	ReleaseMany(ctx context.Context, leases []Lease) []error
}

// Notifier is an optional capability of stores that can tell an agent when
// a lease may have changed hands, for every key of the store at once (one
// subscription per agent and store, whatever the number of jobs).
//
// Notify subscribes and returns once the subscription is live, or with an
// error when it cannot be set up (the caller then polls). Until ctx is done
// it calls changed(key) whenever the lease on key may have changed hands (at
// least on every Release, and on expiry where the store sees it), and
// changed("") when notifications may have been missed (a reconnect): every
// key may have changed. changed must not block; calls are hints only, the
// caller still asks the store.
type Notifier interface {
	Notify(ctx context.Context, changed func(key string)) error
}

// Wrapper is implemented by providers that wrap another (the metrics
// instrumentation), so that capabilities can be found beneath them.
type Wrapper interface {
	Unwrap() Provider
}

// As finds a capability of p, looking beneath wrappers.
func As[T any](p Provider) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	var zero T
	return zero, false
}

// NextToken is a new term's token: one above both the store's counter and
// the caller's floor (AcquireRequest.Floor).
func NextToken(counter, floor uint64) uint64 { return max(counter, floor) + 1 }
