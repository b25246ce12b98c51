package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ChildScript is the supervised command of every test cluster, electd's or
// an anchor's: `sh child.sh LOG` appends "start TOKEN PID NODE UNIXNANO" to
// LOG the moment it runs, and "stop ..." when it gets SIGTERM, so a reader
// can rebuild every term (the trap is set first: a SIGTERM right after the
// start line still writes the stop line). TOKEN is ELECTD_TOKEN (etcdctl lock's
// ETCD_LOCK_REV for that anchor, else 0); the start line's own timestamp is
// the end of a takeover, so how often the log is polled does not count.
const ChildScript = `log="$1"
tok="${ELECTD_TOKEN:-${ETCD_LOCK_REV:-0}}"
trap 'echo "stop $tok $$ $ELECTD_NODE $(date +%s%N)" >> "$log"; exit 0' TERM
echo "start $tok $$ $ELECTD_NODE $(date +%s%N)" >> "$log"
while :; do sleep 0.05; done
`

// Record is one line of a child log.
type Record struct {
	Kind  string // start | stop
	Token string // ELECTD_TOKEN
	PID   int
	Node  string // ELECTD_NODE
	At    time.Time
}

// TokenNum is the token as a number (0 when it is not one: a redsync value).
func (r Record) TokenNum() uint64 {
	n, _ := strconv.ParseUint(r.Token, 10, 64)
	return n
}

func (r Record) String() string {
	return fmt.Sprintf("%s %s token %s pid %d at %s", r.Kind, r.Node, r.Token, r.PID, r.At.Format("15:04:05.000"))
}

// ChildLog reads the log that ChildScript writes, incrementally.
type ChildLog struct {
	Path string

	mu   sync.Mutex
	off  int64
	recs []Record
}

// NewChildLog reads path (which need not exist yet).
func NewChildLog(path string) *ChildLog { return &ChildLog{Path: path} }

// Records reads the complete lines appended since the last call and returns
// every record so far, in the order written.
func (l *ChildLog) Records() ([]Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.Path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // an incomplete line is read again next time
		}
		l.off += int64(len(line))
		fs := strings.Fields(line)
		if len(fs) != 5 {
			return nil, fmt.Errorf("bad line in %s: %q", l.Path, line)
		}
		pid, err1 := strconv.Atoi(fs[2])
		ns, err2 := strconv.ParseInt(fs[4], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad line in %s: %q", l.Path, line)
		}
		l.recs = append(l.recs, Record{fs[0], fs[1], pid, fs[3], time.Unix(0, ns)})
	}
	return append([]Record(nil), l.recs...), nil
}

// Starts is the start records so far.
func (l *ChildLog) Starts() ([]Record, error) {
	recs, err := l.Records()
	var s []Record
	for _, r := range recs {
		if r.Kind == "start" {
			s = append(s, r)
		}
	}
	return s, err
}

// Running is the children that started and are alive now.
func (l *ChildLog) Running() ([]Record, error) {
	starts, err := l.Starts()
	var out []Record
	for _, r := range starts {
		if Alive(r.PID) {
			out = append(out, r)
		}
	}
	return out, err
}

// WaitStart waits for a child start with index from or more (among the
// starts) by a node other than not ("" for any), and returns it.
func (l *ChildLog) WaitStart(ctx context.Context, from int, not string, within time.Duration) (Record, error) {
	var got Record
	var err error
	ok := Until(within, 5*time.Millisecond, func() bool {
		if err = ctx.Err(); err != nil {
			return true
		}
		var s []Record
		if s, err = l.Starts(); err != nil {
			return true
		}
		for i := from; i < len(s); i++ {
			if s[i].Node != not {
				got = s[i]
				return true
			}
		}
		return false
	})
	if err != nil {
		return got, err
	}
	if !ok {
		return got, fmt.Errorf("no child started within %s", within)
	}
	return got, nil
}

// WaitStarts waits until at least n children have started and returns the
// starts.
func (l *ChildLog) WaitStarts(n int, within time.Duration) ([]Record, error) {
	if _, err := l.WaitStart(context.Background(), n-1, "", within); err != nil {
		s, _ := l.Starts()
		return s, fmt.Errorf("fewer than %d children started within %s: %v", n, within, s)
	}
	return l.Starts()
}

// History is what a child log's history shows: every term (a child's
// start, in the order written), the overlaps between terms, the tokens that
// repeat or go back, and what a fence would make of the terms.
type History struct {
	Terms       int
	Overlaps    []Overlap
	Repeats     []Record // terms whose token an earlier term had
	Regressions []Record // terms whose token is below an earlier term's, and new
	// FenceRefused is the terms a fence would refuse: one that remembers
	// the highest token it has seen accepts a term's writes only when its
	// token is above every earlier term's (a repeat or a regression; a
	// later term's writes come after an earlier's, so refusing them is what
	// a correct fence does, and the new leader is locked out).
	FenceRefused int
}

// Overlap is two terms that ran at once: Later started while Earlier had
// not yet stopped, for For (until the first of the two stopped, or until
// now while both run).
type Overlap struct {
	Earlier, Later Record
	For            time.Duration
}

func (o Overlap) String() string {
	return fmt.Sprintf("child %d (token %s, %s) started %s before child %d (token %s, %s) stopped",
		o.Later.PID, o.Later.Token, o.Later.Node, o.For.Round(time.Millisecond), o.Earlier.PID, o.Earlier.Token, o.Earlier.Node)
}

// Problems is every overlap, repeat and regression, in words.
func (h History) Problems() []string {
	var bad []string
	for _, o := range h.Overlaps {
		bad = append(bad, o.String())
	}
	for _, r := range h.Repeats {
		bad = append(bad, fmt.Sprintf("token repeated: child %d (%s) has token %s, which an earlier term had", r.PID, r.Node, r.Token))
	}
	for _, r := range h.Regressions {
		bad = append(bad, fmt.Sprintf("token went back: child %d (%s) has token %s, below an earlier term's", r.PID, r.Node, r.Token))
	}
	return bad
}

// History reads the log's history. A child's end is its stop line, else
// ends[pid] (children killed without one), else now while it is alive;
// a child with none of these has no known end and overlaps nothing after
// it.
func (l *ChildLog) History(ends map[int]time.Time) (History, error) {
	recs, err := l.Records()
	if err != nil {
		return History{}, err
	}
	stops := map[int]time.Time{}
	for _, r := range recs {
		if r.Kind == "stop" {
			stops[r.PID] = r.At
		}
	}
	for pid, at := range ends {
		if _, ok := stops[pid]; !ok {
			stops[pid] = at
		}
	}
	now := time.Now()
	end := func(r Record) (time.Time, bool) {
		if at, ok := stops[r.PID]; ok {
			return at, true
		}
		if Alive(r.PID) {
			return now, true
		}
		return time.Time{}, false
	}
	var h History
	var starts []Record
	seen := map[uint64]bool{}
	var high uint64
	for _, r := range recs {
		if r.Kind != "start" {
			continue
		}
		n := r.TokenNum()
		if len(starts) > 0 {
			switch {
			case seen[n]:
				h.Repeats = append(h.Repeats, r)
			case n < high:
				h.Regressions = append(h.Regressions, r)
			}
			if n <= high {
				h.FenceRefused++
			}
		}
		for _, e := range starts {
			eEnd, ok := end(e)
			if !ok || !eEnd.After(r.At) {
				continue
			}
			until := eEnd
			if rEnd, ok := end(r); ok && rEnd.Before(until) {
				until = rEnd
			}
			h.Overlaps = append(h.Overlaps, Overlap{Earlier: e, Later: r, For: until.Sub(r.At)})
		}
		seen[n] = true
		if n > high {
			high = n
		}
		starts = append(starts, r)
	}
	h.Terms = len(starts)
	return h, nil
}

// CheckHistory checks the log's history (see History): no child started
// before an earlier one had gone, and every token is above every earlier
// one. It returns what it found wrong.
func (l *ChildLog) CheckHistory(ends map[int]time.Time) ([]string, error) {
	h, err := l.History(ends)
	if err != nil {
		return nil, err
	}
	return h.Problems(), nil
}
