package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
)

// acquireAttempts bounds the retries of Acquire when the lease was freed
// between the failed conditional write and the read of the holder, or when
// MySQL reports a deadlock.
const acquireAttempts = 5

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Provider = (*NotifyingProvider)(nil)
	_ providers.Notifier = (*NotifyingProvider)(nil)
)

// Provider is a lease store on one table of one SQL database.
type Provider struct {
	d       *dialect
	log     hclog.Logger
	channel string // postgres: the NOTIFY channel, electd_<table>

	ensureMu sync.Mutex
	ensured  bool
	readOnly bool // Settings.OpenReadOnly: never creates the table

	renews *renewStmts // sqlite: prepared renewals, one at a time (stmts.go)
	wake   *lockWake   // mysql: named locks that wake candidates (lockwake.go)

	closeOnce sync.Once
	closeErr  error
}

// New opens the store described by s. It does no I/O: the table is created
// by the first operation. The result is a *NotifyingProvider (a Notifier)
// for postgres and for a SQLite file, a *Provider otherwise.
func New(ctx context.Context, s Settings, log hclog.Logger) (providers.Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	d, err := newDialect(s)
	if err != nil {
		return nil, err
	}
	p := &Provider{d: d, log: log.Named("sql").With("driver", s.Driver), readOnly: s.readOnly}
	if s.readOnly {
		return p, nil // observes only: no notifications to set up
	}
	if s.Driver == "sqlite" {
		p.renews = newRenewStmts()
	}
	table := s.Table
	if table == "" {
		table = DefaultTable
	}
	switch {
	case d.pg != nil:
		p.channel = "electd_" + table
		return &NotifyingProvider{Provider: p, l: newListener(d.pg, p.channel, p.log)}, nil
	case s.Driver == "sqlite" && sqlitePath(s.DSN) != "":
		return &NotifyingProvider{Provider: p, l: newFileWatch(p, sqlitePath(s.DSN), table)}, nil
	case s.Driver == "mysql":
		p.wake = newLockWake(d.db, table, d.table, p.log)
		return &NotifyingProvider{Provider: p, l: p.wake}, nil
	}
	return p, nil
}

// ensure creates the table (and SQLite's release log) once per Provider. Several clients may race to
// create it (postgres can then fail on its catalog); the table existing
// afterwards is what counts.
func (p *Provider) ensure(ctx context.Context) error {
	p.ensureMu.Lock()
	defer p.ensureMu.Unlock()
	if p.ensured {
		return nil
	}
	// SQLite can answer SQLITE_BUSY at once, without waiting out
	// busy_timeout, when several processes open a fresh file together (the
	// switch to WAL, a stale read snapshot): a few short retries ride it out.
	var err error
	for attempt := 0; attempt < 6; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
			case <-ctx.Done():
				return fmt.Errorf("create table: %w", ctx.Err())
			}
		}
		if _, err = p.d.db.ExecContext(ctx, p.d.q.create); err != nil {
			if _, perr := p.d.db.ExecContext(ctx, p.d.q.probe); perr == nil {
				err = nil // another client created it
			}
		}
		if err == nil {
			err = p.execAll(ctx, p.d.q.extra)
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	p.ensured = true
	return nil
}

// execAll runs statements in order.
func (p *Provider) execAll(ctx context.Context, stmts []string) error {
	for _, q := range stmts {
		if _, err := p.d.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Acquire starts a new term on key for holder when the lease is free,
// expired (by the database clock) or already held by holder.
// The new term's token is above req.Floor too: the statement
// writes max(token + 1, floor + 1).
func (p *Provider) Acquire(ctx context.Context, req providers.AcquireRequest) (providers.Lease, error) {
	l, err := p.acquire(ctx, req.Key, req.Holder, req.TTL, req.Floor)
	p.wakeAfter([]string{req.Key}, []error{err})
	return l, providers.WrapFailure("sql", "acquire", req.Key, err)
}

func (p *Provider) acquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (providers.Lease, error) {
	if err := limits.Check(key, holder, ttl); err != nil {
		return providers.Lease{}, err
	}
	if err := p.ensure(ctx); err != nil {
		return providers.Lease{}, err
	}
	var lastErr error
	for range acquireAttempts {
		l, won, err := p.tryAcquire(ctx, key, holder, ttl, floor)
		if err != nil {
			if p.d.retryable(err) && ctx.Err() == nil {
				lastErr = err
				continue
			}
			return providers.Lease{}, err
		}
		if won {
			l.Key, l.Holder, l.TTL = key, holder, ttl
			return l, nil
		}
		// Not won: read who holds it. Free or expired means it changed
		// hands between the two statements; try again.
		cur, remaining, found, err := p.observe(ctx, key)
		if err != nil {
			return providers.Lease{}, err
		}
		if found && cur.Holder != "" && remaining > 0 {
			return providers.Lease{}, held(cur, remaining)
		}
		lastErr = errors.New("lease changed hands during acquire")
	}
	return providers.Lease{}, fmt.Errorf("gave up after %d attempts: %w", acquireAttempts, lastErr)
}

// tryAcquire makes one conditional write. won is false when the lease is
// held by someone else (or, for mysql, when the row had to be created).
func (p *Provider) tryAcquire(ctx context.Context, key, holder string, ttl time.Duration, floor uint64) (l providers.Lease, won bool, err error) {
	q := p.d.q
	if q.upsert != "" {
		args := []any{key, holder, int64(floor + 1), p.d.ttlArg(ttl)}
		if p.d.pg != nil {
			args = append(args, p.channel)
		}
		var token int64
		var exp expiry
		dest := []any{&token, &exp, &l.Value}
		if p.d.pg != nil {
			var notified dbsql.NullString
			dest = append(dest, &notified)
		}
		err := p.d.db.QueryRowContext(ctx, q.upsert, args...).Scan(dest...)
		if errors.Is(err, dbsql.ErrNoRows) {
			return l, false, nil
		}
		if err != nil {
			return l, false, err
		}
		l.Token, l.Expires = uint64(token), exp.t
		return l, true, nil
	}

	// MySQL has no UPDATE ... RETURNING: update and read back in one
	// transaction; the row lock taken by the update makes racers wait and
	// then re-check the condition against the committed row.
	tx, err := p.d.db.BeginTx(ctx, nil)
	if err != nil {
		return l, false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	res, err := tx.ExecContext(ctx, q.update, holder, int64(floor+1), p.d.ttlArg(ttl), key, holder)
	if err != nil {
		return l, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return l, false, err
	}
	if n == 0 {
		if err := tx.Rollback(); err != nil {
			return l, false, err
		}
		// Create the row, free, if it is missing; the next attempt takes it.
		if _, _, found, err := p.observe(ctx, key); err != nil || found {
			return l, false, err
		}
		if _, err := p.d.db.ExecContext(ctx, q.insertFree, key); err != nil {
			return l, false, err
		}
		return p.tryAcquire(ctx, key, holder, ttl, floor)
	}
	var token int64
	var exp expiry
	if err := tx.QueryRowContext(ctx, q.selectRow, key).Scan(new(string), &token, &exp, &l.Value, new(int)); err != nil {
		return l, false, err
	}
	if err := tx.Commit(); err != nil {
		return l, false, err
	}
	l.Token, l.Expires = uint64(token), exp.t
	return l, true, nil
}

// Renew pushes the expiry out by lease.TTL and stores lease.Value when
// holder and token still match. An expired lease that nobody took may be
// renewed (holder and token still match, as the contract says).
func (p *Provider) Renew(ctx context.Context, lease providers.Lease) (providers.Lease, error) {
	exp, err := p.renew(ctx, lease)
	if errors.Is(err, providers.ErrLost) {
		p.wakeEnded(lease.Key)
	}
	if err != nil {
		return providers.Lease{}, providers.WrapFailure("sql", "renew", lease.Key, err)
	}
	lease.Expires = exp
	return lease, nil
}

func (p *Provider) renew(ctx context.Context, lease providers.Lease) (time.Time, error) {
	if err := limits.CheckRenew(lease); err != nil {
		return time.Time{}, err
	}
	if err := p.ensure(ctx); err != nil {
		return time.Time{}, err
	}
	args := []any{p.d.ttlArg(lease.TTL), lease.Value, lease.Key, lease.Holder, int64(lease.Token)}
	var exp expiry
	if p.d.q.selectExp == "" {
		err := p.d.db.QueryRowContext(ctx, p.d.q.renew, args...).Scan(&exp)
		if errors.Is(err, dbsql.ErrNoRows) {
			return time.Time{}, lost(lease)
		}
		return exp.t, err
	}
	tx, err := p.d.db.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	res, err := tx.ExecContext(ctx, p.d.q.renew, args...)
	if err != nil {
		return time.Time{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return time.Time{}, err
	} else if n == 0 {
		return time.Time{}, lost(lease)
	}
	if err := tx.QueryRowContext(ctx, p.d.q.selectExp, lease.Key).Scan(&exp); err != nil {
		return time.Time{}, err
	}
	return exp.t, tx.Commit()
}

// Release clears the holder and sets the expiry to now when holder and
// token still match; the token and lease.Value stay in the record.
func (p *Provider) Release(ctx context.Context, lease providers.Lease) error {
	err := p.release(ctx, lease)
	if err == nil || errors.Is(err, providers.ErrLost) {
		p.wakeEnded(lease.Key)
	}
	return providers.WrapFailure("sql", "release", lease.Key, err)
}

func (p *Provider) release(ctx context.Context, lease providers.Lease) error {
	if err := limits.CheckHeld(lease); err != nil {
		return err
	}
	if err := p.ensure(ctx); err != nil {
		return err
	}
	args := []any{lease.Value, lease.Key, lease.Holder, int64(lease.Token)}
	if p.d.pg != nil {
		var notified dbsql.NullString
		err := p.d.db.QueryRowContext(ctx, p.d.q.release, append(args, p.channel)...).Scan(&notified)
		if errors.Is(err, dbsql.ErrNoRows) {
			return lost(lease)
		}
		return err
	}
	res, err := p.d.db.ExecContext(ctx, p.d.q.release, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return lost(lease)
	}
	return nil
}

func lost(l providers.Lease) error {
	return fmt.Errorf("sql: lease %q token %d of %q: %w", l.Key, l.Token, l.Holder, providers.ErrLost)
}

// Observe returns the record of key; Holder is "" when the lease is free or
// expired by the database clock.
func (p *Provider) Observe(ctx context.Context, key string) (providers.Lease, error) {
	if !p.readOnly {
		if err := p.ensure(ctx); err != nil {
			return providers.Lease{}, providers.Wrap("sql", "observe", key, err)
		}
	}
	l, remaining, _, err := p.observe(ctx, key)
	if err != nil && p.readOnly && noTable(err) {
		return providers.Lease{Key: key}, nil // no agent has acquired a lease here yet
	}
	if err != nil {
		return providers.Lease{}, providers.Wrap("sql", "observe", key, err)
	}
	if remaining <= 0 {
		l.Holder = ""
	}
	if l.Holder != "" && p.wake != nil {
		p.wake.watch(key)
	}
	return l, nil
}

// observe reads the raw record and how long its term has left by the
// database's clock (≤ 0: expired); found is false for a key never acquired.
func (p *Provider) observe(ctx context.Context, key string) (l providers.Lease, remaining time.Duration, found bool, err error) {
	l.Key = key
	var token, us int64
	var exp expiry
	err = p.d.db.QueryRowContext(ctx, p.d.q.selectRow, key).Scan(&l.Holder, &token, &exp, &l.Value, &us)
	if errors.Is(err, dbsql.ErrNoRows) {
		return l, 0, false, nil
	}
	if err != nil {
		return providers.Lease{Key: key}, 0, false, err
	}
	l.Token, l.Expires = uint64(token), exp.t
	return l, time.Duration(us) * time.Microsecond, true, nil
}

// held is the *HeldError for a record found held with remaining left.
func held(cur providers.Lease, remaining time.Duration) error {
	return &providers.HeldError{Key: cur.Key, Holder: cur.Holder, Token: cur.Token, Expires: cur.Expires, Remaining: remaining}
}

// Close closes the connection pool. It is safe to call more than once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		if p.renews != nil {
			p.renews.close()
		}
		p.closeErr = p.d.db.Close()
	})
	return p.closeErr
}
