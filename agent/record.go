package agent

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/electd/electd/providers"
)

// A task job's lease carries its slot record (providers.Lease.Value, at most
// providers.MaxValueLen bytes): the last slot run, the last trigger request
// taken, the last run's outcome and when a run last succeeded. The record
// travels with the lease, so whichever node leads next knows what was run,
// and every node that observes the lease shows it.
//
// It is compact JSON with one-letter keys:
//
//	{"s":1764230400,"g":7,"k":1764230400,"b":1764230400123,"e":1764230461456,
//	 "x":3,"r":"failed","w":"...","n":"node-1","t":42,"q":7,"ok":1764144061}
//
// s: the last slot recorded (Unix seconds) and g: the last trigger request
// taken (the trigger key's token) are what at most once rests on. The run:
// k its slot, b and e when it started and ended (Unix milliseconds; no e
// while it runs), x its exit code, r its result and w why, n the node, t
// the fencing token, q the trigger request it ran for. ok: when a run last
// succeeded (Unix milliseconds). a, ak, aq: the run still in progress when
// the last run is a slot skipped meanwhile (leader mode's overlap rule): when
// it started, its slot and its request; its node and token are the skip's
// (one term). A new leader that finds it reports it killed, as a run left
// running.
//
// A record written by an agent before this format is the slot alone, in
// decimal ("1764230400"): it reads as a record with that slot and no run.

// Task run results.
const (
	ResultRunning   = "running"
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultTimedOut  = "timed_out"
	ResultKilled    = "killed" // stopped by a step-down (or the agent stopping)
	ResultSkipped   = "skipped"
)

// TaskRun is one run of a task, as the slot record carries it across the
// cluster (and as GET /v1/jobs/{job} shows it in task.last_run).
type TaskRun struct {
	Slot      time.Time  `json:"slot"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"` // nil while running, or when the command did not start
	Result    string     `json:"result"`
	Why       string     `json:"why,omitempty"` // skipped, killed or not started: why
	Node      string     `json:"node"`
	Token     uint64     `json:"token"`
	Trigger   uint64     `json:"trigger,omitempty"` // the trigger request it ran for; 0: on schedule
}

// Failed says whether the run's outcome fires on_task_failed.
func (r *TaskRun) Failed() bool {
	return r.Result != ResultSucceeded && r.Result != ResultRunning
}

// Duration is how long the run took (0 while it runs).
func (r *TaskRun) Duration() time.Duration {
	if r.StartedAt == nil || r.EndedAt == nil {
		return 0
	}
	return r.EndedAt.Sub(*r.StartedAt)
}

// slotRecord is the decoded lease value of a task job.
type slotRecord struct {
	slot        time.Time // the last slot recorded as run
	trigger     uint64    // the last trigger request taken
	run         *TaskRun  // nil: none known
	active      *TaskRun  // the run in progress when run is a skip; else nil
	lastSuccess time.Time
}

// current is the run in progress: run, or the one a skip left running.
func (rec slotRecord) current() *TaskRun {
	if rec.active != nil {
		return rec.active
	}
	return rec.run
}

type wireRecord struct {
	S  int64  `json:"s,omitempty"`
	G  uint64 `json:"g,omitempty"`
	K  int64  `json:"k,omitempty"`
	B  int64  `json:"b,omitempty"`
	E  int64  `json:"e,omitempty"`
	X  *int   `json:"x,omitempty"`
	R  string `json:"r,omitempty"`
	W  string `json:"w,omitempty"`
	N  string `json:"n,omitempty"`
	T  uint64 `json:"t,omitempty"`
	Q  uint64 `json:"q,omitempty"`
	OK int64  `json:"ok,omitempty"`
	A  int64  `json:"a,omitempty"`
	AK int64  `json:"ak,omitempty"`
	AQ uint64 `json:"aq,omitempty"`
}

func unixOrZero(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

func milliPtr(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// parseRecord reads a lease value: this format, the old one (the slot
// alone), or anything else as an empty record.
func parseRecord(v string) slotRecord {
	if !strings.HasPrefix(v, "{") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return slotRecord{}
		}
		return slotRecord{slot: time.Unix(n, 0).UTC()}
	}
	var w wireRecord
	if json.Unmarshal([]byte(v), &w) != nil {
		return slotRecord{}
	}
	rec := slotRecord{slot: unixOrZero(w.S), trigger: w.G}
	if ok := milliPtr(w.OK); ok != nil {
		rec.lastSuccess = *ok
	}
	if w.R != "" {
		rec.run = &TaskRun{Slot: unixOrZero(w.K), StartedAt: milliPtr(w.B), EndedAt: milliPtr(w.E), ExitCode: w.X,
			Result: w.R, Why: w.W, Node: w.N, Token: w.T, Trigger: w.Q}
		if w.A > 0 || w.AK > 0 {
			rec.active = &TaskRun{Slot: unixOrZero(w.AK), StartedAt: milliPtr(w.A), Result: ResultRunning,
				Node: w.N, Token: w.T, Trigger: w.AQ}
		}
	}
	return rec
}

// String encodes the record, within providers.MaxValueLen: a long why, then
// a long node name, are cut to fit.
func (rec slotRecord) String() string {
	w := wireRecord{G: rec.trigger}
	if !rec.slot.IsZero() {
		w.S = rec.slot.Unix()
	}
	if !rec.lastSuccess.IsZero() {
		w.OK = rec.lastSuccess.UnixMilli()
	}
	if r := rec.run; r != nil {
		w.K, w.X, w.R, w.W, w.N, w.T, w.Q = r.Slot.Unix(), r.ExitCode, r.Result, r.Why, r.Node, r.Token, r.Trigger
		if r.Slot.IsZero() {
			w.K = 0
		}
		if r.StartedAt != nil {
			w.B = r.StartedAt.UnixMilli()
		}
		if r.EndedAt != nil {
			w.E = r.EndedAt.UnixMilli()
		}
		if a := rec.active; a != nil {
			w.AK, w.AQ = a.Slot.Unix(), a.Trigger
			if a.Slot.IsZero() {
				w.AK = 0
			}
			if a.StartedAt != nil {
				w.A = a.StartedAt.UnixMilli()
			}
		}
	}
	for {
		b, _ := json.Marshal(w)
		over := len(b) - providers.MaxValueLen
		switch {
		case over <= 0:
			return string(b)
		case w.W != "":
			w.W = cut(w.W, len(w.W)-over-3)
		case w.N != "":
			w.N = cut(w.N, len(w.N)-over-3)
		default:
			return string(b) // cannot happen: numbers and a result word
		}
	}
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "~"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
