package sql

import (
	"context"
	"crypto/sha256"
	dbsql "database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
)

// MySQL has no LISTEN/NOTIFY, but it has named locks: GET_LOCK blocks until
// the session holding the name releases it (RELEASE_LOCK, or the session
// ends). lockWake uses them as a bell, beside the lease table, which stays
// the only authority on who leads:
//
//   - a holder takes the bell of each key it leads (GET_LOCK, on one
//     connection of its own for all its bells) after its Acquire committed,
//     and rings it (RELEASE_LOCK) after its Release committed;
//   - a candidate that was refused a key (or observed it held) waits on the
//     key's bell on a connection of its own while it has Notify
//     subscribers; when GET_LOCK returns, it gives the lock straight back
//     and calls changed(key). The candidate then asks the table, as after
//     any notification.
//
// A holder that dies drops its connection, and its bells ring too: the
// candidates wake, find the term not over by the table, and wait for its
// end as before. A bell that was not taken (its holder's connection was
// busy, or gone) wakes nobody; the candidates poll at retry_every, as
// without notifications. So bells only make a waiting candidate earlier,
// never a leader sooner than the table allows.

const (
	// maxWaiters bounds the connections a provider opens to wait on bells:
	// a candidate for more keys than that polls for the others.
	maxWaiters = 16
	// bellWait is how long one GET_LOCK of a candidate waits before it
	// asks again (and notices a lost connection).
	bellWait = 60 // seconds
	// unrungPause, doubling up to maxUnrungPause, spaces out the checks of
	// a bell that no holder has taken yet (the holder takes it just after
	// its Acquire commits), and unrungChecks bounds them: the candidate's
	// own polling covers a holder without a bell.
	unrungPause    = 2 * time.Millisecond
	maxUnrungPause = 200 * time.Millisecond
	unrungChecks   = 40
)

// bellName is the named lock of key in table: a hash, since lock names are
// at most 64 characters. Two keys with one name would only wake each other.
func bellName(table, key string) string {
	h := sha256.Sum256([]byte(table + "\x00" + key))
	return "electd-" + hex.EncodeToString(h[:16])
}

// lockWake is the providers.Notifier source of MySQL and MariaDB.
type lockWake struct {
	db    *dbsql.DB
	table string
	check string // args bell name, key → IS_USED_LOCK, whether the lease is held
	log   hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	subs     map[*func(string)]struct{}
	interest map[string]bool               // keys refused or seen held: candidates of this process wait for them
	waiting  map[string]context.CancelFunc // the waiters running, by key

	bmu  sync.Mutex      // guards conn, rung and want; held over their statements
	conn *dbsql.Conn     // the holder's connection, which holds its bells
	rung map[string]bool // the bells this process holds
	want map[string]bool // the keys this process leads: the bells it should hold
}

// newLockWake: quoted is the table's name quoted for MySQL.
func newLockWake(db *dbsql.DB, table, quoted string, log hclog.Logger) *lockWake {
	ctx, cancel := context.WithCancel(context.Background())
	w := &lockWake{
		db: db, table: table, log: log.Named("bells"),
		check: "SELECT IS_USED_LOCK(?), EXISTS(SELECT 1 FROM " + quoted +
			" WHERE `key` = ? AND holder <> '' AND expires_at > UTC_TIMESTAMP(6))",
		ctx: ctx, cancel: cancel,
		subs: map[*func(string)]struct{}{}, interest: map[string]bool{}, waiting: map[string]context.CancelFunc{},
		rung: map[string]bool{}, want: map[string]bool{},
	}
	return w
}

// subscribe adds a subscriber once the database answers.
func (w *lockWake) subscribe(ctx context.Context, fn func(string)) error {
	if w.ctx.Err() != nil {
		return errors.New("provider closed")
	}
	if err := w.db.PingContext(ctx); err != nil {
		return err
	}
	sub := &fn
	w.mu.Lock()
	w.subs[sub] = struct{}{}
	for key := range w.interest {
		w.startWaiter(key)
	}
	w.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-w.ctx.Done():
		}
		w.mu.Lock()
		delete(w.subs, sub)
		if len(w.subs) == 0 {
			for key, stop := range w.waiting {
				stop()
				delete(w.waiting, key)
			}
		}
		w.mu.Unlock()
	}()
	return nil
}

// won: this process leads keys; it takes their bells before the Acquire
// returns, so a candidate refused after that finds them taken.
func (w *lockWake) won(keys ...string) {
	w.mu.Lock()
	for _, key := range keys {
		delete(w.interest, key)
		if stop, ok := w.waiting[key]; ok {
			stop()
			delete(w.waiting, key)
		}
	}
	w.mu.Unlock()
	w.take(keys)
}

// ended: this process's terms on keys are over (released or lost); it
// rings their bells before the Release returns.
func (w *lockWake) ended(keys ...string) { w.ring(keys) }

// refused: keys are held by another; candidates of this process wait for
// their bells. A bell of this process on one is stale (its term ended
// without a Release) and is rung first.
func (w *lockWake) refused(keys ...string) {
	w.ring(keys)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, key := range keys {
		if !w.interest[key] && len(w.interest) >= 4*maxWaiters {
			continue // keys beyond that are polled
		}
		w.interest[key] = true
		if len(w.subs) > 0 {
			w.startWaiter(key)
		}
	}
}

// watch: key was seen held (Observe); candidates of this process wait for
// its bell, as after a refusal. (It may be this process's own term: its
// release wakes its own subscribers, a hint like any other.)
func (w *lockWake) watch(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.interest[key] || len(w.interest) >= 4*maxWaiters {
		return
	}
	w.interest[key] = true
	if len(w.subs) > 0 {
		w.startWaiter(key)
	}
}

// startWaiter starts the waiter of key unless one runs or too many do.
// Called with mu held.
func (w *lockWake) startWaiter(key string) {
	if _, ok := w.waiting[key]; ok || len(w.waiting) >= maxWaiters || w.ctx.Err() != nil {
		return
	}
	ctx, stop := context.WithCancel(w.ctx)
	w.waiting[key] = stop
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rang := w.wait(ctx, key)
		w.mu.Lock()
		if w.waiting[key] != nil && ctx.Err() == nil {
			delete(w.waiting, key)
		}
		if rang {
			// Spent: the candidate asks the table now, and a refusal
			// starts a new wait.
			delete(w.interest, key)
		}
		w.mu.Unlock()
		stop()
		if rang {
			w.notify(key)
		}
	}()
}

// wait waits on key's bell and reports whether it rang.
func (w *lockWake) wait(ctx context.Context, key string) bool {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		w.log.Debug("no connection to wait on a bell", "key", key, "error", err)
		return false
	}
	// The connection may hold the lock when it is given up (a cancelled
	// wait that got it, a failed RELEASE_LOCK): it is closed, not pooled.
	defer discard(conn)
	name := bellName(w.table, key)
	pause := unrungPause
	for unrung := 0; unrung < unrungChecks; {
		var used dbsql.NullInt64
		var held bool
		if err := conn.QueryRowContext(ctx, w.check, name, key).Scan(&used, &held); err != nil {
			return false
		}
		if !held {
			// Released (or expired) before a wait could hear it: a bell
			// taken and rung while this waiter looked elsewhere.
			return ctx.Err() == nil
		}
		if !used.Valid {
			// No holder has taken it yet (it takes it after its Acquire
			// commits), or the holder has none: waiting now would return
			// at once.
			unrung++
			select {
			case <-time.After(pause):
				pause = min(2*pause, maxUnrungPause)
				continue
			case <-ctx.Done():
				return false
			}
		}
		var got dbsql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, bellWait).Scan(&got); err != nil {
			return false
		}
		if got.Int64 == 1 {
			_, _ = conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
			return ctx.Err() == nil
		}
	}
	return false
}

func (w *lockWake) notify(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	for fn := range w.subs {
		(*fn)(key)
	}
}

// bellsPerStatement bounds the GET_LOCK or RELEASE_LOCK calls of one
// statement (MySQL 5.7+ and MariaDB hold many named locks per session).
const bellsPerStatement = 64

// take takes the bells of keys on the holder's connection, without waiting:
// a bell held for a moment by a candidate that just woke is tried again in
// the background for half a second. Failures are logged: a bell is a hint.
func (w *lockWake) take(keys []string) {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	var todo []string
	for _, key := range keys {
		w.want[key] = true
		if !w.rung[key] {
			todo = append(todo, key)
		}
	}
	busy, err := w.lockAll(todo, "GET_LOCK(?, 0)", func(key string, got int64) bool {
		if got == 1 {
			w.rung[key] = true
		}
		return got != 1
	})
	if err != nil {
		w.log.Debug("cannot take bells; candidates of these keys poll", "error", err)
		return
	}
	if len(busy) > 0 {
		w.wg.Add(1)
		go w.retake(busy)
	}
}

func (w *lockWake) retake(keys []string) {
	defer w.wg.Done()
	for range 25 {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-w.ctx.Done():
			return
		}
		w.bmu.Lock()
		// Only the terms still held: a bell taken after its release
		// would be stale.
		keys = slices.DeleteFunc(keys, func(key string) bool { return !w.want[key] || w.rung[key] })
		var err error
		keys, err = w.lockAll(keys, "GET_LOCK(?, 0)", func(key string, got int64) bool {
			if got == 1 {
				w.rung[key] = true
			}
			return got != 1
		})
		w.bmu.Unlock()
		if err != nil || len(keys) == 0 {
			return
		}
	}
	w.log.Debug("bells held by other sessions; candidates of these keys poll", "keys", len(keys))
}

// ring gives up the bells of keys this process holds.
func (w *lockWake) ring(keys []string) {
	w.bmu.Lock()
	defer w.bmu.Unlock()
	var todo []string
	for _, key := range keys {
		delete(w.want, key)
		if w.rung[key] {
			todo = append(todo, key)
			delete(w.rung, key)
		}
	}
	if _, err := w.lockAll(todo, "RELEASE_LOCK(?)", func(string, int64) bool { return false }); err != nil {
		w.log.Debug("cannot ring bells", "error", err)
	}
}

// lockAll runs fn (GET_LOCK or RELEASE_LOCK) for keys on the holder's
// connection, bellsPerStatement a statement, and returns the keys for which
// each answered true. Called with bmu held. A new connection first takes
// again the bells of the terms still held; a failed one is closed, which
// rings every bell it held.
func (w *lockWake) lockAll(keys []string, fn string, each func(key string, got int64) bool) (again []string, err error) {
	if len(keys) == 0 || w.ctx.Err() != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	if w.conn == nil {
		if w.conn, err = w.db.Conn(ctx); err != nil {
			return nil, err
		}
		held := maps.Keys(w.rung)
		w.rung = map[string]bool{}
		if _, err := w.exec(ctx, slices.Collect(held), "GET_LOCK(?, 0)", func(key string, got int64) bool {
			if got == 1 {
				w.rung[key] = true
			}
			return false
		}); err != nil {
			return nil, err
		}
	}
	return w.exec(ctx, keys, fn, each)
}

func (w *lockWake) exec(ctx context.Context, keys []string, fn string, each func(key string, got int64) bool) (again []string, err error) {
	for start := 0; start < len(keys); start += bellsPerStatement {
		chunk := keys[start:min(start+bellsPerStatement, len(keys))]
		calls := make([]string, len(chunk))
		args := make([]any, len(chunk))
		got := make([]dbsql.NullInt64, len(chunk))
		dest := make([]any, len(chunk))
		for n, key := range chunk {
			calls[n], args[n], dest[n] = fn, bellName(w.table, key), &got[n]
		}
		if err := w.conn.QueryRowContext(ctx, "SELECT "+strings.Join(calls, ", "), args...).Scan(dest...); err != nil {
			discard(w.conn)
			w.conn = nil
			return nil, err
		}
		for n, key := range chunk {
			if each(key, got[n].Int64) {
				again = append(again, key)
			}
		}
	}
	return again, nil
}

// The provider's hooks: no-ops for the stores that notify otherwise.

func (p *Provider) wakeEnded(keys ...string) {
	if p.wake != nil && len(keys) > 0 {
		p.wake.ended(keys...)
	}
}

// wakeAfter passes the verdicts of Acquires to the bells: errs[n] is the
// verdict on keys[n].
func (p *Provider) wakeAfter(keys []string, errs []error) {
	if p.wake == nil {
		return
	}
	var won, refused []string
	for n, err := range errs {
		switch {
		case err == nil:
			won = append(won, keys[n])
		case errors.Is(err, providers.ErrHeld):
			refused = append(refused, keys[n])
		}
	}
	if len(won) > 0 {
		p.wake.won(won...)
	}
	if len(refused) > 0 {
		p.wake.refused(refused...)
	}
}

func (w *lockWake) close() {
	w.cancel()
	w.wg.Wait()
	w.bmu.Lock()
	defer w.bmu.Unlock()
	if w.conn != nil {
		discard(w.conn) // rings every bell still held
		w.conn = nil
	}
}

// discard closes conn's session instead of returning it to the pool, so
// that no named lock stays with a pooled connection.
func discard(conn *dbsql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
