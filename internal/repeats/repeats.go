// Package repeats logs a failure that keeps happening as a few lines, not
// one per attempt: the first failure at once, then a summary at growing
// intervals (how many, since when, the last error), and one line when it
// ends. Many callers that fail for one cause (every job of one store) share
// a key, and so share the lines.
package repeats

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Kind is what one Log says about its failures.
type Kind struct {
	First     string // the first failure: "cannot reach the store"
	Still     string // a summary: "store still unreachable"
	Recovered string // the end: "store reachable again"
	// Key names a key in the lines ("provider").
	Key string
	// Level is the level of the failure lines (hclog.Warn when not set);
	// the end is logged at Info, or at Level when that is lower.
	Level hclog.Level
	// First and Max interval between summaries: each summary doubles the
	// interval (default 10s and 10m).
	Interval, MaxInterval time.Duration
}

// Log is the failures of one Kind, by key. It is safe for concurrent use.
type Log struct {
	log  hclog.Logger
	now  func() time.Time
	kind Kind

	mu   sync.Mutex
	keys map[string]*run
}

// run is one key's failures.
type run struct {
	failing  bool
	since    time.Time // the first failure of this run of failures
	failures int       // in this run
	lastErr  error
	logged   bool          // a line was logged for this run
	lastLine time.Time     // the last line of any kind for the key
	every    time.Duration // the interval to the next summary
	// Failures of runs that logged no line (brief flaps soon after a
	// line), for the next first line.
	unlogged      int
	unloggedSince time.Time
}

// New is a Log that writes to log and reads the time from now.
func New(log hclog.Logger, now func() time.Time, kind Kind) *Log {
	if kind.Level == hclog.NoLevel {
		kind.Level = hclog.Warn
	}
	if kind.Interval <= 0 {
		kind.Interval = 10 * time.Second
	}
	if kind.MaxInterval < kind.Interval {
		kind.MaxInterval = max(10*time.Minute, kind.Interval)
	}
	return &Log{log: log, now: now, kind: kind, keys: map[string]*run{}}
}

// Failed records a failure under key. The first of a run is logged with
// args (who met it) and err; the next ones only count, until a summary is
// due. A run that begins soon after the key's last line (a store that
// flaps) does not log a first line of its own: its failures go into the
// summaries, whose interval keeps growing.
func (l *Log) Failed(key string, err error, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.keys[key]
	if r == nil {
		r = &run{}
		l.keys[key] = r
	}
	r.lastErr = err
	if !r.failing {
		r.failing, r.since, r.failures, r.logged = true, now, 1, false
		if r.lastLine.IsZero() || now.Sub(r.lastLine) >= r.every {
			if r.lastLine.IsZero() || now.Sub(r.lastLine) >= l.kind.MaxInterval {
				r.every = l.kind.Interval // quiet for long: start over
			} else {
				r.every = min(2*r.every, l.kind.MaxInterval)
			}
			r.logged, r.lastLine = true, now
			line := append([]any{l.kind.Key, key}, args...)
			if r.unlogged > 0 {
				line = append(line, "earlier_failures", r.unlogged, "earlier_since", r.unloggedSince.Format(time.RFC3339))
				r.unlogged = 0
			}
			l.log.Log(l.kind.Level, l.kind.First, append(line, "error", err)...)
		}
		return
	}
	r.failures++
	if now.Sub(r.lastLine) < r.every {
		return
	}
	r.logged, r.lastLine = true, now
	r.every = min(2*r.every, l.kind.MaxInterval)
	l.log.Log(l.kind.Level, fmt.Sprintf("%s: %s since %s", l.kind.Still, failures(r.failures), clock(r.since)),
		l.kind.Key, key, "failures", r.failures, "since", r.since.Format(time.RFC3339), "error", r.lastErr)
}

// Succeeded records a success under key: it ends the key's run of failures,
// with a line when the run was logged.
func (l *Log) Succeeded(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.keys[key]
	if r == nil || !r.failing {
		return
	}
	r.failing = false
	if !r.logged {
		if r.unlogged == 0 {
			r.unloggedSince = r.since
		}
		r.unlogged += r.failures
		return
	}
	now := l.now()
	r.lastLine = now
	l.log.Log(min(hclog.Info, l.kind.Level), fmt.Sprintf("%s after %s since %s", l.kind.Recovered, failures(r.failures), clock(r.since)),
		l.kind.Key, key, "failures", r.failures, "since", r.since.Format(time.RFC3339),
		"for", now.Sub(r.since).Round(time.Second))
}

// Since is when key's current run of failures began, and how many it has
// had; zero when key is not failing.
func (l *Log) Since(key string) (time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.keys[key]; r != nil && r.failing {
		return r.since, r.failures
	}
	return time.Time{}, 0
}

// clock is a time as a log line shows it to a person: the time of day, in
// the zone the time carries.
func clock(t time.Time) string { return t.Format("15:04:05") }

func failures(n int) string {
	if n == 1 {
		return "1 failure"
	}
	return fmt.Sprintf("%d failures", n)
}
