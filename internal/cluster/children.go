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

// CheckHistory checks the log's history: tokens strictly increase from one
// child to the next, and no child started before the previous one had gone
// (its stop line, or ends for children killed without one). It returns what
// it found wrong.
func (l *ChildLog) CheckHistory(ends map[int]time.Time) ([]string, error) {
	recs, err := l.Records()
	if err != nil {
		return nil, err
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
	var bad []string
	var prev *Record
	for i := range recs {
		r := recs[i]
		if r.Kind != "start" {
			continue
		}
		if prev != nil {
			if r.TokenNum() <= prev.TokenNum() {
				bad = append(bad, fmt.Sprintf("token did not grow: child %d has token %s after token %s", r.PID, r.Token, prev.Token))
			}
			end, ok := stops[prev.PID]
			if !ok && Alive(prev.PID) {
				bad = append(bad, fmt.Sprintf("child %d (token %s) started while child %d (token %s) was still running", r.PID, r.Token, prev.PID, prev.Token))
			} else if ok && end.After(r.At) {
				bad = append(bad, fmt.Sprintf("child %d (token %s) started %s before child %d (token %s) stopped", r.PID, r.Token, end.Sub(r.At), prev.PID, prev.Token))
			}
		}
		prev = &r
	}
	return bad, nil
}
