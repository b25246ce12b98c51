package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/electd/electd/providers"
)

// The bucket's keys. A lease is leasePrefix + its escaped key; clockKey is
// the one key every client writes to learn the server's time.
const (
	leasePrefix = "lease."
	clockKey    = "clock"
)

// maxAttempts bounds the read-and-compare-and-set rounds of one operation.
// A round is lost only when another client wrote the key in between, so
// losing this many in a row means the key is fought over without end.
const maxAttempts = 32

var errBusy = errors.New("the record kept changing under concurrent writes")

var errStale = errors.New("the store answered with a record older than this client's own last write")

// kvKey is the bucket key of a lease key. NATS keys are subjects: bytes
// other than letters, digits, "-" and "_" are written =XX (hex), so any key
// is one subject token, and distinct keys stay distinct ("a.b", "a b").
func kvKey(key string) string {
	var b strings.Builder
	b.WriteString(leasePrefix)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

// leaseKey is the lease key of a bucket key, or false for a key that is no
// lease (the clock, or a key electd did not write).
func leaseKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, leasePrefix)
	if !ok || rest == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		if rest[i] != '=' {
			b.WriteByte(rest[i])
			continue
		}
		if i+2 >= len(rest) {
			return "", false
		}
		var c byte
		if _, err := fmt.Sscanf(rest[i+1:i+3], "%02X", &c); err != nil {
			return "", false
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), true
}

// record is the value of a lease key. It is never deleted: the token and
// the value outlive releases and expiries.
type record struct {
	Holder string `json:"holder"`          // "" when released
	Token  uint64 `json:"token"`           // the current (or last) term's
	TTL    int64  `json:"ttl_ns,omitzero"` // the term's ttl, from the entry's time
	Value  string `json:"value,omitzero"`
}

func (r record) ttl() time.Duration { return time.Duration(r.TTL) }

// state is a key as read: its record, its revision (0: no record) and the
// server's time of the write that left it.
type state struct {
	rec record
	rev uint64
	at  time.Time
}

func (p *Provider) read(ctx context.Context, kv jetstream.KeyValue, key string) (state, error) {
	e, err := p.get(ctx, kvKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return state{}, nil
	}
	if err != nil {
		return state{}, p.explain(err)
	}
	st := state{rev: e.rev, at: e.created}
	if err := json.Unmarshal(e.value, &st.rec); err != nil {
		return state{}, fmt.Errorf("the record of key %s in bucket %q is not electd's (%v): was it written by another program?", kvKey(key), p.bucket, err)
	}
	return st, nil
}

// write stores rec if the key is still at revision rev (0: absent) and
// returns the new revision. A lost race is errConflict.
func (p *Provider) write(ctx context.Context, kv jetstream.KeyValue, key string, rec record, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		rev, err = kv.Create(ctx, kvKey(key), b)
	} else {
		rev, err = kv.Update(ctx, kvKey(key), b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, errConflict
	}
	if err != nil {
		return 0, p.explain(err)
	}
	return rev, nil
}

var errConflict = errors.New("compare-and-set lost")

// Acquire takes the lease when there is no record, the record is released,
// its term has expired by the server's clock, or holder already holds it;
// the token grows by one.
// The new term's token is above req.Floor too.
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	key, holder, ttl := req.Key, req.Holder, req.TTL
	if err := limits.Check(key, holder, ttl); err != nil {
		return providers.Lease{}, providers.Wrap("nats", "acquire", key, err)
	}
	l, err := p.acquire(ctx, key, holder, ttl, req.Floor)
	return l, providers.WrapFailure("nats", "acquire", key, err)
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	kv, err := p.store(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	for range maxAttempts {
		st, err := p.read(ctx, kv, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if st.rev != 0 && st.rec.Holder != "" && st.rec.Holder != holder {
			// Held by another: expired only if the server's clock says
			// so. The compare-and-set below fails if the holder renewed
			// meanwhile.
			now, err := p.now(ctx, kv)
			if err != nil {
				return providers.Lease{}, err
			}
			if age := now.Sub(st.at); age < st.rec.ttl() {
				return providers.Lease{}, &providers.HeldError{
					Key: key, Holder: st.rec.Holder, Token: st.rec.Token,
					Expires: st.at.Add(st.rec.ttl()),
					// A probe older than the record makes age negative:
					// never more than the whole term.
					Remaining: min(st.rec.ttl()-age, st.rec.ttl()),
				}
			}
		}
		next := record{Holder: holder, Token: providers.NextToken(st.rec.Token, floor), TTL: int64(ttl), Value: st.rec.Value}
		sent := time.Now()
		rev, err := p.write(ctx, kv, key, next, st.rev)
		if errors.Is(err, errConflict) {
			continue // another client wrote first: judge again
		}
		if err != nil {
			p.forget(key)
			return providers.Lease{}, err
		}
		p.remember(key, written{holder: holder, token: next.Token, rev: rev})
		return providers.Lease{Key: key, Holder: holder, Token: next.Token, TTL: ttl, Expires: sent.Add(ttl), Value: next.Value}, nil
	}
	return providers.Lease{}, errBusy
}

// Renew pushes the term's end to ttl from now and stores lease.Value, when
// holder and token still match.
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	if err := limits.CheckRenew(lease); err != nil {
		return providers.Lease{}, providers.Wrap("nats", "renew", lease.Key, err)
	}
	next := record{Holder: lease.Holder, Token: lease.Token, TTL: int64(lease.TTL), Value: lease.Value}
	sent := time.Now()
	if err := p.rewrite(ctx, lease, next); err != nil {
		return providers.Lease{}, providers.Wrap("nats", "renew", lease.Key, err)
	}
	lease.Expires = sent.Add(lease.TTL)
	return lease, nil
}

// Release clears the holder, keeping the token and storing lease.Value,
// when holder and token still match.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckRenew(lease); err != nil {
		return providers.Wrap("nats", "release", lease.Key, err)
	}
	next := record{Token: lease.Token, Value: lease.Value}
	if err := p.rewrite(ctx, lease, next); err != nil {
		return providers.Wrap("nats", "release", lease.Key, err)
	}
	p.forget(lease.Key)
	return nil
}

// rewrite writes next over the lease's record if lease.Holder still holds
// it with lease.Token, else ErrLost.
func (p *Provider) rewrite(ctx context.Context, lease providers.Lease, next record) error {
	kv, err := p.store(ctx)
	if err != nil {
		return err
	}
	mine, wrote := p.lastWrite(lease)
	if wrote {
		// Nobody wrote the key since this client's last write of the
		// term: the compare-and-set proves holder and token still match.
		rev, err := p.write(ctx, kv, lease.Key, next, mine)
		if err == nil {
			p.remember(lease.Key, written{holder: lease.Holder, token: lease.Token, rev: rev})
			return nil
		}
		p.forget(lease.Key)
		if !errors.Is(err, errConflict) {
			return err
		}
		// Someone wrote since (or a write of ours whose answer was lost):
		// judge from the record.
	}
	for range maxAttempts {
		st, err := p.read(ctx, kv, lease.Key)
		if err != nil {
			return err
		}
		if wrote && st.rev < mine {
			// The answer is older than this client's own acknowledged
			// write of the term: a stream leader deposed while it was cut
			// off, and not yet told, answers reads and refuses writes
			// from its old state until it is. That is no verdict on the
			// term. Tried again, on the same revision; if the store did
			// lose the write, the agent's window ends the term.
			p.remember(lease.Key, written{holder: lease.Holder, token: lease.Token, rev: mine})
			return fmt.Errorf("%w: revision %d, this client wrote %d", errStale, st.rev, mine)
		}
		if st.rev == 0 || st.rec.Holder != lease.Holder || st.rec.Token != lease.Token {
			return providers.ErrLost
		}
		rev, err := p.write(ctx, kv, lease.Key, next, st.rev)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return err
		}
		p.remember(lease.Key, written{holder: lease.Holder, token: lease.Token, rev: rev})
		return nil
	}
	return errBusy
}

// Observe returns the key's record; Holder is "" when it is released or its
// term has expired by the server's clock.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	l, err := p.observe(ctx, key)
	if err != nil {
		return providers.Lease{}, providers.Wrap("nats", "observe", key, err)
	}
	return l, nil
}

func (p *Provider) observe(ctx context.Context, key string) (providers.Lease, error) {
	kv, err := p.store(ctx)
	if err != nil {
		return providers.Lease{}, err
	}
	st, err := p.read(ctx, kv, key)
	if err != nil || st.rev == 0 {
		return providers.Lease{Key: key}, err
	}
	l := providers.Lease{Key: key, Token: st.rec.Token, Value: st.rec.Value, Expires: st.at}
	if st.rec.Holder == "" {
		return l, nil
	}
	l.Expires = st.at.Add(st.rec.ttl())
	now, err := p.now(ctx, kv)
	if err != nil {
		return providers.Lease{}, err
	}
	if now.Sub(st.at) < st.rec.ttl() {
		l.Holder, l.TTL = st.rec.Holder, st.rec.ttl()
	}
	return l, nil
}

// probe is one reading of the server's clock, shared by the callers that
// ask while it is in flight.
type probe struct {
	done chan struct{}
	at   time.Time
	err  error
}

// now is a time the server stamped after this call began (or during a
// probe in flight when it began): a write of the clock key, read back. Any
// such time is no later than the server's clock when a write sent after
// this returns is applied, so a term judged over by it is over when that
// write lands. It is never compared with the local clock.
func (p *Provider) now(ctx context.Context, kv jetstream.KeyValue) (time.Time, error) {
	p.mu.Lock()
	if last := p.lastProbe; last != nil && time.Since(last.done) < probeReuse {
		// A reading this fresh is as good, only a little earlier: a
		// term looks live a little longer, never shorter.
		p.mu.Unlock()
		return last.at, nil
	}
	pr := p.probing
	if pr == nil {
		pr = &probe{done: make(chan struct{})}
		p.probing = pr
		go p.runProbe(kv, pr)
	}
	p.mu.Unlock()
	select {
	case <-pr.done:
		if pr.err != nil {
			return time.Time{}, fmt.Errorf("read the server's clock: %w", pr.err)
		}
		return pr.at, nil
	case <-ctx.Done():
		// A probe that outlasts its caller may hang on a server lost
		// silently: the caller's deadline is a reason to check the
		// connection, as for any request (explain), not only the probe's
		// own opTimeout.
		return time.Time{}, fmt.Errorf("read the server's clock: %w", p.explain(ctx.Err()))
	}
}

func (p *Provider) runProbe(kv jetstream.KeyValue, pr *probe) {
	ctx, cancel := context.WithTimeout(p.closed, opTimeout)
	defer cancel()
	// Another client's later write of the clock key may be what Get
	// returns: its time is as good, stamped before the Get was answered.
	if _, pr.err = kv.Put(ctx, clockKey, nil); pr.err == nil {
		var e entry
		if e, pr.err = p.get(ctx, clockKey); pr.err == nil {
			pr.at = e.created
		}
	}
	if pr.err != nil {
		pr.err = p.explain(pr.err)
	}
	p.mu.Lock()
	p.probing = nil
	if pr.err == nil {
		p.lastProbe = &probeReading{at: pr.at, done: time.Now()}
	}
	p.mu.Unlock()
	close(pr.done)
}

// probeReuse is how long a reading of the server's clock is used again
// without a new probe: the fleet's member reads and a batch of candidates'
// acquisitions cost one probe, not one each.
const probeReuse = 50 * time.Millisecond

// probeReading is the last reading: the server's time, and when (on this
// process's monotonic clock) it arrived.
type probeReading struct {
	at   time.Time
	done time.Time
}
