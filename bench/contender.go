package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// contenderMain is `electd-bench contender`: one anchor contender, run by the
// anchors suite as a process of its own so that a crash is a real kill -9.
// While it leads it supervises the same child script as electd's run block
// does; on SIGTERM it stops the child, then releases the way the tool
// documents, and exits 0.
func contenderMain(args []string) int {
	fs := flag.NewFlagSet("contender", flag.ContinueOnError)
	kindName := fs.String("kind", "", "etcd-election | client-go | redsync")
	node := fs.String("node", "", "contender id")
	dir := fs.String("dir", "", "directory of the ready file")
	childLog := fs.String("log", "", "child log")
	script := fs.String("script", "", "child script")
	endpoint := fs.String("store", "", "etcd endpoint or redis address")
	name := fs.String("name", "bench", "lock or election name")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL (etcd-election), expiry (redsync)")
	renew := fs.Duration("renew", 500*time.Millisecond, "redsync: extend every")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c := &contender{node: *node, dir: *dir, childLog: *childLog, script: *script}
	var err error
	switch *kindName {
	case "etcd-election":
		err = c.etcdElection(ctx, *endpoint, *name, *ttl)
	case "client-go":
		err = c.clientGo(ctx, *endpoint, *name)
	case "redsync":
		err = c.redsync(ctx, *endpoint, *name, *ttl, *renew)
	default:
		err = fmt.Errorf("unknown kind %q", *kindName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "contender:", err)
		return 1
	}
	return 0
}

type contender struct {
	node, dir, childLog, script string
	child                       *exec.Cmd
	childDone                   chan struct{}
}

func (c *contender) markReady() {
	os.WriteFile(filepath.Join(c.dir, c.node+".ready"), nil, 0o644)
}

// startChild runs the child script, which dies with this process.
func (c *contender) startChild(token string) error {
	cmd := exec.Command("sh", c.script, c.childLog)
	cmd.Env = append(os.Environ(), "ELECTD_NODE="+c.node, "ELECTD_TOKEN="+token)
	// Its own group, stopped as a group, as electd stops its run child;
	// and SIGKILL when this contender dies.
	cmd.SysProcAttr = groupDyingWithUs()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	c.child, c.childDone = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(c.childDone)
	return nil
}

// stopChild sends SIGTERM and waits (SIGKILL after 5 s).
func (c *contender) stopChild() {
	if c.child == nil {
		return
	}
	pgid := c.child.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.childDone:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.childDone
	}
	c.child = nil
}

// etcdElection: go.etcd.io/etcd/client/v3/concurrency, Campaign / Resign,
// leadership lost when the session's lease expires.
func (c *contender) etcdElection(ctx context.Context, endpoint, name string, ttl time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	secs := int((ttl + time.Second - 1) / time.Second)
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(secs))
		if err != nil {
			return fmt.Errorf("session: %w", err)
		}
		e := concurrency.NewElection(s, "/anchor-election/"+name)
		c.markReady()
		if err := e.Campaign(ctx, c.node); err != nil {
			s.Close()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("campaign: %w", err)
		}
		if err := c.startChild(strconv.FormatInt(e.Rev(), 10)); err != nil {
			return err
		}
		select {
		case <-s.Done(): // lease lost: campaign again with a new session
			c.stopChild()
		case <-ctx.Done():
			c.stopChild()
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := e.Resign(rctx)
			cancel()
			s.Close()
			return err
		}
	}
	return nil
}

// redsync: github.com/go-redsync/redsync/v4 with its default retry policy
// (32 tries, 50–250 ms apart); the holder extends every renew, as redsync
// leaves renewal to the user.
func (c *contender) redsync(ctx context.Context, addr, name string, ttl, renew time.Duration) error {
	client := goredislib.NewClient(&goredislib.Options{Addr: addr})
	defer client.Close()
	rs := redsync.New(goredis.NewPool(client))
	c.markReady()
	for ctx.Err() == nil {
		m := rs.NewMutex("anchor-redsync-"+name, redsync.WithExpiry(ttl))
		if err := m.LockContext(ctx); err != nil {
			continue // ErrFailed after its tries: try again, as a loop around Lock must
		}
		if err := c.startChild(m.Value()); err != nil {
			return err
		}
		t := time.NewTicker(renew)
	held:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				c.stopChild()
				_, err := m.UnlockContext(context.Background())
				return err
			case <-t.C:
				// A failed extend is retried on the next tick while the
				// lock may still be valid, as a careful user would.
				if ok, _ := m.ExtendContext(ctx); !ok && time.Now().After(m.Until()) {
					break held
				}
			}
		}
		t.Stop()
		c.stopChild()
	}
	return nil
}

// Kubernetes client-go defaults (tools/leaderelection).
const (
	k8sLeaseDuration = 15 * time.Second
	k8sRenewDeadline = 10 * time.Second
	k8sRetryPeriod   = 2 * time.Second
	k8sJitterFactor  = 1.2
)

// leaderRecord is client-go's LeaderElectionRecord.
type leaderRecord struct {
	HolderIdentity       string    `json:"holderIdentity"`
	LeaseDurationSeconds int       `json:"leaseDurationSeconds"`
	AcquireTime          time.Time `json:"acquireTime"`
	RenewTime            time.Time `json:"renewTime"`
	LeaderTransitions    int       `json:"leaderTransitions"`
}

// k8sElector is client-go's LeaderElector, with its resource lock replaced
// by one etcd key updated under compare-and-swap on the key's mod revision —
// what the Kubernetes API server does with a Lease's resourceVersion.
type k8sElector struct {
	cli         *clientv3.Client
	key, id     string
	observed    leaderRecord
	observedRaw []byte
	observedRev int64
	observedAt  time.Time
}

func (le *k8sElector) isLeader() bool { return le.observed.HolderIdentity == le.id }

// tryAcquireOrRenew is client-go's function of that name: get or create
// the record; if another holder's lease is still valid by our own
// observation clock, give up; else write ourselves under CAS.
func (le *k8sElector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	rec := leaderRecord{HolderIdentity: le.id, LeaseDurationSeconds: int(k8sLeaseDuration / time.Second), RenewTime: now, AcquireTime: now}
	resp, err := le.cli.Get(ctx, le.key)
	if err != nil {
		return false
	}
	if len(resp.Kvs) == 0 {
		raw, _ := json.Marshal(rec)
		tx, err := le.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(le.key), "=", 0)).
			Then(clientv3.OpPut(le.key, string(raw))).Commit()
		if err != nil || !tx.Succeeded {
			return false
		}
		le.observed, le.observedRaw, le.observedRev, le.observedAt = rec, raw, tx.Header.Revision, now
		return true
	}
	kv := resp.Kvs[0]
	var old leaderRecord
	if err := json.Unmarshal(kv.Value, &old); err != nil {
		return false
	}
	if !bytes.Equal(kv.Value, le.observedRaw) {
		le.observed, le.observedRaw, le.observedAt = old, kv.Value, now
	}
	le.observedRev = kv.ModRevision
	if old.HolderIdentity != "" &&
		le.observedAt.Add(time.Duration(old.LeaseDurationSeconds)*time.Second).After(now) && !le.isLeader() {
		return false
	}
	if le.isLeader() {
		rec.AcquireTime = old.AcquireTime
		rec.LeaderTransitions = old.LeaderTransitions
	} else {
		rec.LeaderTransitions = old.LeaderTransitions + 1
	}
	raw, _ := json.Marshal(rec)
	tx, err := le.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(le.key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(le.key, string(raw))).Commit()
	if err != nil || !tx.Succeeded {
		return false
	}
	le.observed, le.observedRaw, le.observedRev, le.observedAt = rec, raw, tx.Header.Revision, now
	return true
}

// release is ReleaseOnCancel: an empty holder and a 1 s lease.
func (le *k8sElector) release(ctx context.Context) error {
	if !le.isLeader() {
		return nil
	}
	now := time.Now()
	rec := leaderRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now, LeaderTransitions: le.observed.LeaderTransitions}
	raw, _ := json.Marshal(rec)
	tx, err := le.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(le.key), "=", le.observedRev)).
		Then(clientv3.OpPut(le.key, string(raw))).Commit()
	if err != nil {
		return err
	}
	if !tx.Succeeded {
		return errors.New("release: record changed")
	}
	le.observed, le.observedRaw = rec, raw
	return nil
}

// jitter is wait.Jitter: d plus up to factor*d.
func jitter(d time.Duration, factor float64) time.Duration {
	return d + time.Duration(rand.Float64()*factor*float64(d))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// clientGo is LeaderElector.Run with ReleaseOnCancel: acquire (JitterUntil
// retry period, jitter 1.2, sliding), then renew every retry period, each
// renewal retried every retry period until the renew deadline.
func (c *contender) clientGo(ctx context.Context, endpoint, name string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	le := &k8sElector{cli: cli, key: "/anchor-client-go/" + name, id: c.node}
	c.markReady()
	for ctx.Err() == nil {
		// acquire
		for !le.tryAcquireOrRenew(ctx) {
			if !sleepCtx(ctx, jitter(k8sRetryPeriod, k8sJitterFactor)) {
				return nil
			}
		}
		if err := c.startChild(strconv.Itoa(le.observed.LeaderTransitions)); err != nil {
			return err
		}
		// renew: wait.Until(retryPeriod) of PollImmediateUntil(retryPeriod,
		// tryAcquireOrRenew) bounded by the renew deadline.
	renewing:
		for sleepCtx(ctx, k8sRetryPeriod) {
			deadline, cancel := context.WithTimeout(ctx, k8sRenewDeadline)
			ok := false
			for deadline.Err() == nil {
				if ok = le.tryAcquireOrRenew(deadline); ok {
					break
				}
				sleepCtx(deadline, k8sRetryPeriod)
			}
			cancel()
			if !ok && ctx.Err() == nil {
				break renewing // leader lost
			}
		}
		c.stopChild()
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return le.release(rctx)
		}
	}
	return nil
}
