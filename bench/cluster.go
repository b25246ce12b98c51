package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// kind says how one family of contenders is started, made ready, crashed and
// stopped. Every contender supervises cluster.ChildScript.
type kind struct {
	name string
	// cluster is an empty cluster of this kind's contenders in dir.
	cluster func(dir string) (*cluster.Cluster, error)
	// ready returns once the contender is campaigning.
	ready func(ctx context.Context, c *cluster.Cluster, a *cluster.Agent) error
	// crash is kill -9 of the contender alone (its command may survive:
	// that is what is measured for etcdctl).
	crash func(a *cluster.Agent)
	// term is the graceful stop the tool documents.
	term func(a *cluster.Agent)
}

func crashPid(a *cluster.Agent) { a.Signal(syscall.SIGKILL) }
func termPid(a *cluster.Agent)  { a.Signal(syscall.SIGTERM) }

// readyFile waits for the file the anchor contenders create once they
// campaign.
func readyFile(ctx context.Context, c *cluster.Cluster, a *cluster.Agent) error {
	path := filepath.Join(c.Dir, a.Node+".ready")
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if a.Exited() {
			return fmt.Errorf("%s exited before it was ready: %v", a.Node, a.Err())
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return fmt.Errorf("%s not ready: %w", a.Node, ctx.Err())
		}
	}
}

// contenders is three (by default) contenders of one kind on one store,
// and what the measurements so far have accounted for.
type contenders struct {
	k    kind
	c    *cluster.Cluster
	seen int // starts accounted for: the first leader and each measured takeover
}

func newContenders(ctx context.Context, k kind, dir string, n int) (*contenders, error) {
	c, err := k.cluster(dir)
	if err != nil {
		return nil, err
	}
	cs := &contenders{k: k, c: c}
	for range n {
		if err := cs.spawn(ctx); err != nil {
			cs.stop()
			return nil, err
		}
	}
	if _, err := c.Children.WaitStart(ctx, 0, "", 60*time.Second); err != nil {
		cs.stop()
		return nil, fmt.Errorf("%s: no leader: %w", k.name, err)
	}
	cs.seen = 1
	return cs, nil
}

// spawn starts a contender under a node id never used before and waits
// until it campaigns.
func (cs *contenders) spawn(ctx context.Context) error {
	a, err := cs.c.StartNew()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cs.k.ready(rctx, cs.c, a); err != nil {
		return fmt.Errorf("%s: %w\n%s", cs.k.name, err, cluster.Tail(a.LogPath, 2000))
	}
	return nil
}

// stop ends every contender: SIGTERM to its group, then SIGKILL.
func (cs *contenders) stop() { cs.c.StopAll(15 * time.Second) }

// runResult is one measured takeover.
type runResult struct {
	took time.Duration
	// oldAlive: the command of the contender that was stopped was still
	// running when the next one started (two at once).
	oldAlive bool
	// extra: leader changes nobody asked for since the previous run
	// (a lease lost under load, for instance).
	extra int
	// exitErr: a graceful stop that did not exit 0.
	exitErr error
}

var errNoLeader = errors.New("no running leader to stop")

// measure stops the current leader (crash or graceful), times until the next
// child runs, then replaces the stopped contender with a fresh one.
func (cs *contenders) measure(ctx context.Context, crash bool, within time.Duration) (runResult, error) {
	var res runResult
	starts, err := cs.c.Children.Starts()
	if err != nil {
		return res, err
	}
	if len(starts) == 0 {
		return res, errNoLeader
	}
	res.extra = len(starts) - cs.seen
	lead := starts[len(starts)-1]
	a := cs.c.Agent(lead.Node)
	if a == nil || a.Exited() || !cluster.Alive(lead.PID) {
		return res, fmt.Errorf("%w: last child %d of %s is gone", errNoLeader, lead.PID, lead.Node)
	}
	from := len(starts)
	t0 := time.Now()
	if crash {
		cs.k.crash(a)
	} else {
		cs.k.term(a)
	}
	next, err := cs.c.Children.WaitStart(ctx, from, lead.Node, within)
	if err != nil {
		return res, fmt.Errorf("after stopping %s: %w", lead.Node, err)
	}
	res.took = next.At.Sub(t0)
	res.oldAlive = cluster.Alive(lead.PID)

	if err, ok := a.Wait(20 * time.Second); !ok {
		res.exitErr = errors.New("did not exit within 20s")
	} else if !crash && err != nil {
		res.exitErr = err
	}
	// Whatever the stopped contender left (etcdctl's orphaned command),
	// and the contender itself when it hung.
	a.Kill()
	cs.c.Forget(lead.Node)

	if err := cs.spawn(ctx); err != nil {
		return res, err
	}
	// Any start besides the one measured, from here to the next run, is a
	// leader change nobody asked for; the next measure counts it.
	cs.seen = from + 1
	return res, nil
}

// series is the outcome of many runs of one kind.
type series struct {
	crash, handover     sample
	crashWant, termWant int
	failures            []string
	oldAlive            int // runs where the stopped contender's command outlived it
	extra               int
	badExits            int
}

// runSeries measures crash runs, then graceful runs, on a fresh cluster of
// three contenders. A failed run is noted and the cluster rebuilt.
func runSeries(ctx context.Context, k kind, dir string, crashRuns, termRuns int, crashWithin, termWithin, settle time.Duration, logf func(string, ...any)) series {
	s := series{crashWant: crashRuns, termWant: termRuns}
	var c *contenders
	gen := 0
	defer func() {
		if c != nil {
			c.stop()
		}
	}()
	phase := func(crash bool, runs int, within time.Duration) {
		name := "handover"
		if crash {
			name = "crash"
		}
		for i := 0; i < runs && ctx.Err() == nil; i++ {
			if c == nil {
				gen++
				var err error
				c, err = newContenders(ctx, k, filepath.Join(dir, fmt.Sprintf("cluster-%d", gen)), 3)
				if err != nil {
					s.failures = append(s.failures, err.Error())
					logf("%s: %v", k.name, err)
					return
				}
			}
			// Each run starts on a quiet cluster: the contender started
			// after the last run has come up and made its first attempts,
			// as between the steps of a rolling restart.
			select {
			case <-time.After(settle):
			case <-ctx.Done():
				return
			}
			r, err := c.measure(ctx, crash, within)
			if err != nil {
				s.failures = append(s.failures, fmt.Sprintf("%s run %d: %v", name, i+1, err))
				logf("%s %s run %d: %v", k.name, name, i+1, err)
				c.stop()
				c = nil
				continue
			}
			if crash {
				s.crash = append(s.crash, r.took)
			} else {
				s.handover = append(s.handover, r.took)
			}
			if r.oldAlive {
				s.oldAlive++
			}
			s.extra += r.extra
			if r.exitErr != nil {
				s.badExits++
				s.failures = append(s.failures, fmt.Sprintf("%s run %d: stopped contender: %v", name, i+1, r.exitErr))
			}
			logf("%s %s %d/%d: %s", k.name, name, i+1, runs, cell(r.took))
		}
	}
	phase(true, crashRuns, crashWithin)
	phase(false, termRuns, termWithin)
	return s
}
