package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
)

// keptReleases bounds the released-keys log of SQLite: a subscriber that
// falls further behind hears "every key may have changed".
const keptReleases = 1024

// settleFor is how long the database's writes must pause before the
// release log is read.
const settleFor = time.Millisecond

// sqliteReleaseLog is the schema behind SQLite's notifications: a trigger
// appends every release (holder set to ”) to <table>_released, in the
// releasing statement's own transaction, and trims the log.
func sqliteReleaseLog(table string) []string {
	log := `"` + table + `_released"`
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + log + ` (seq INTEGER PRIMARY KEY AUTOINCREMENT, "key" TEXT NOT NULL)`,
		`CREATE TRIGGER IF NOT EXISTS "` + table + `_released" AFTER UPDATE OF holder ON "` + table + `"
			WHEN old.holder <> '' AND new.holder = '' BEGIN
			INSERT INTO ` + log + ` ("key") VALUES (new."key");
			DELETE FROM ` + log + ` WHERE seq <= (SELECT max(seq) FROM ` + log + `) - ` + fmt.Sprint(keptReleases) + `;
			END`,
	}
}

// sqlitePath is the database file a DSN names, or "" for an in-memory
// database (nothing to watch).
func sqlitePath(dsn string) string {
	p := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		if strings.Contains(p[i:], "mode=memory") {
			return ""
		}
		p = p[:i]
	}
	if p == "" || p == ":memory:" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	return abs
}

// fileWatch tells SQLite subscribers of releases by other processes on the
// same host, without polling: an inotify watch on the database's directory
// wakes it when the database or its WAL is written, and it then reads the
// release log from where it left off.
type fileWatch struct {
	db     *dbsql.DB
	path   string
	table  string // the release log, quoted
	ensure func(context.Context) error
	log    hclog.Logger

	mu      sync.Mutex
	subs    map[*func(string)]struct{}
	watcher *fsnotify.Watcher // nil until the first subscriber
	cancel  context.CancelFunc
	done    chan struct{}
	last    int64 // the last release seen
	closed  bool
}

func newFileWatch(p *Provider, path, table string) *fileWatch {
	return &fileWatch{
		db: p.d.db, path: path, table: `"` + table + `_released"`, ensure: p.ensure,
		log: p.log.Named("watch"), subs: map[*func(string)]struct{}{},
	}
}

func (f *fileWatch) subscribe(ctx context.Context, fn func(string)) error {
	if f.path == "" {
		return errors.New("an in-memory database has no file to watch")
	}
	if err := f.ensure(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("provider closed")
	}
	if f.watcher == nil {
		if err := f.start(ctx); err != nil {
			return err
		}
	}
	sub := &fn
	f.subs[sub] = struct{}{}
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		delete(f.subs, sub)
		f.mu.Unlock()
	}()
	return nil
}

// start opens the watch and reads where the release log stands; f.mu held.
func (f *fileWatch) start(ctx context.Context) error {
	if err := f.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM `+f.table).Scan(&f.last); err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", filepath.Dir(f.path), err)
	}
	if err := w.Add(filepath.Dir(f.path)); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch %s: %w", filepath.Dir(f.path), err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	f.watcher, f.cancel, f.done = w, cancel, make(chan struct{})
	go f.run(rctx, w)
	return nil
}

func (f *fileWatch) run(ctx context.Context, w *fsnotify.Watcher) {
	defer close(f.done)
	wal := f.path + "-wal"
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflowed queue lost events: every key may have changed.
			f.log.Debug("file watch error", "error", err)
			f.tell("")
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if (ev.Name != f.path && ev.Name != wal) || !ev.Has(fsnotify.Write|fsnotify.Create) {
				continue
			}
			// One commit is several writes, and it is visible only once the
			// last is done: read when the writes have settled for a moment,
			// and once more a little later if that found nothing.
			settle := time.NewTimer(settleFor)
			for settling := true; settling; {
				select {
				case <-w.Events:
					settle.Reset(settleFor)
				case <-settle.C:
					settling = false
				case <-ctx.Done():
					return
				}
			}
			if !f.read(ctx) {
				select {
				case <-time.After(10 * settleFor):
					f.read(ctx)
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// read tells subscribers of the releases logged since the last read, and
// reports whether there were any.
func (f *fileWatch) read(ctx context.Context) (found bool) {
	rows, err := f.db.QueryContext(ctx, `SELECT seq, "key" FROM `+f.table+` WHERE seq > ? ORDER BY seq LIMIT ?`, f.last, keptReleases)
	if err != nil {
		f.log.Debug("reading the release log", "error", err)
		f.tell("")
		return true
	}
	defer rows.Close()
	first := true
	for rows.Next() {
		var seq int64
		var key string
		if err := rows.Scan(&seq, &key); err != nil {
			f.tell("")
			return true
		}
		if first && seq > f.last+1 {
			f.tell("") // trimmed before we read it
		}
		first = false
		f.last = seq
		f.tell(key)
	}
	if rows.Err() != nil {
		f.tell("")
	}
	return !first || rows.Err() != nil
}

func (f *fileWatch) tell(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for fn := range f.subs {
		(*fn)(key)
	}
}

func (f *fileWatch) close() {
	f.mu.Lock()
	f.closed = true
	w, cancel, done := f.watcher, f.cancel, f.done
	f.mu.Unlock()
	if w == nil {
		return
	}
	cancel()
	_ = w.Close()
	<-done
}
