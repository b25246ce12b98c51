package clusterfaults

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	ec "github.com/electd/electd/internal/cluster"
	"github.com/electd/electd/internal/teststore"
)

// members are a store's processes, one per host: what every store of the
// suite does with them alike.
type members struct {
	kind  string // names the processes and their logs: "etcd", "redis"
	t     *testing.T
	h     *hosts
	procs map[int]*teststore.Proc
}

// newMembers keeps kind's processes on h, and stops them when t ends.
func newMembers(t *testing.T, h *hosts, kind string) *members {
	m := &members{kind: kind, t: t, h: h, procs: map[int]*teststore.Proc{}}
	t.Cleanup(func() {
		for _, p := range m.procs {
			p.Stop()
		}
	})
	return m
}

// run starts argv as host i's member, its log in dir, in place of the one
// before it.
func (m *members) run(i int, dir string, argv ...string) {
	m.t.Helper()
	p, err := teststore.Start(fmt.Sprintf("%s-h%d", m.kind, i), dir, argv...)
	if err != nil {
		m.t.Fatal(err)
	}
	if old := m.procs[i]; old != nil {
		old.Stop()
	}
	m.procs[i] = p
}

// kill kills host i's member with SIGKILL and waits until it is gone.
func (m *members) kill(i int) { _ = m.procs[i].Signal(syscall.SIGKILL); <-m.procs[i].Exited() }

// logs are the last lines of every member's log.
func (m *members) logs() string {
	var b strings.Builder
	for i := 1; i <= m.h.n; i++ {
		if p := m.procs[i]; p != nil {
			fmt.Fprintf(&b, "--- %s h%d:\n%s\n", m.kind, i, ec.Tail(p.LogPath, 30))
		}
	}
	return b.String()
}
