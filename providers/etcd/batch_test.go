package etcd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// TestRenewManyRequests renews 500 leases in one RenewMany and counts, from
// etcd's own /metrics, the requests that reached etcd: a small constant
// (for the terms it remembers, a LeaseTimeToLive and a keep-alive per
// session; for the unusual ones a read, a write and the single Renews),
// where Renew per lease sends two per lease. It has an etcd of its own, so no other test's requests are
// counted.
//
//	go test -count=1 -v -run TestRenewManyRequests ./providers/etcd/
func TestRenewManyRequests(t *testing.T) {
	t.Parallel()
	endpoint, s := ownServer(t)
	p, other := open(t, s), open(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 500
	leases := acquireMany(t, p, n, time.Minute)
	cli, err := p.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A term's lease key gone as at its expiry (its session is shared
	// with the other terms, so the key is deleted rather than the session
	// revoked).
	expireTerm := func(key string) {
		if _, err := cli.Delete(ctx, p.leaseKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	// The unusual leases, among the plain ones.
	const (
		taken    = 0 // its term ended (lease key gone) and another holder took the key
		released = 1 // released by its holder
		expired  = 2 // its lease key is gone, nobody took the key: renewed on the session again
		value    = 3 // a new Value to store
		newTTL   = 4 // another ttl: moves to the session of that ttl
	)
	expireTerm(leases[taken].Key)
	theirs, err := other.Acquire(ctx, providers.AcquireRequest{Key: leases[taken].Key, Holder: "b", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx, leases[released]); err != nil {
		t.Fatal(err)
	}
	expireTerm(leases[expired].Key)
	leases[value].Value = "slot 3"
	leases[newTTL].TTL = 2 * time.Minute
	// Time passes, so that a refreshed etcd lease shows its full ttl again
	// and one that was not refreshed does not.
	time.Sleep(2 * time.Second)

	before := scrape(t, endpoint)
	start := time.Now()
	got, errs := p.RenewMany(ctx, leases)
	took := time.Since(start)
	after := scrape(t, endpoint)

	if len(got) != n || len(errs) != n {
		t.Fatalf("RenewMany returned %d leases and %d errors for %d", len(got), len(errs), n)
	}
	for i, l := range leases {
		switch i {
		case taken, released:
			if !errors.Is(errs[i], providers.ErrLost) {
				t.Errorf("lease %d (%s): %v, want ErrLost", i, l.Key, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("lease %d (%s): %v", i, l.Key, errs[i])
			continue
		}
		if got[i].Key != l.Key || got[i].Token != l.Token || got[i].Holder != l.Holder || got[i].Value != l.Value || got[i].TTL != l.TTL {
			t.Errorf("lease %d: RenewMany answered %+v for %+v", i, got[i], l)
		}
		if got[i].Expires.Before(start.Add(l.TTL)) {
			t.Errorf("lease %d: expires %s, less than its ttl %s after RenewMany started", i, got[i].Expires.Sub(start), l.TTL)
		}
	}
	if o, err := other.Observe(ctx, leases[taken].Key); err != nil || o.Holder != "b" || o.Token != theirs.Token {
		t.Errorf("the taken lease after RenewMany: %+v, %v; want b's term %d untouched", o, err, theirs.Token)
	}
	if o, err := other.Observe(ctx, leases[released].Key); err != nil || o.Holder != "" {
		t.Errorf("the released lease after RenewMany: %+v, %v; want it free", o, err)
	}
	for _, i := range []int{expired, value, newTTL} {
		l := leases[i]
		st, err := p.read(ctx, cli, l.Key)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(l.TTL / time.Second)
		if !st.held || st.hold.Holder != l.Holder || st.hold.Token != l.Token || st.hold.TTL != want || st.rec.Value != l.Value {
			t.Errorf("lease %d after RenewMany: held %v %+v, record %+v; want %s token %d ttl %d value %q", i, st.held, st.hold, st.rec, l.Holder, l.Token, want, l.Value)
		}
	}
	// etcd's own view of the plain terms: refreshed to their full ttl (it
	// truncates: 59 s left of 60), where 2 s had passed since they were
	// granted.
	for i := 5; i < n; i += 25 {
		st, err := p.read(ctx, cli, leases[i].Key)
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := cli.TimeToLive(ctx, st.leaseID)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL < 58 {
			t.Errorf("lease %d: etcd says %d s left after RenewMany, want its ttl of 60 s again", i, ttl.TTL)
		}
	}

	requests := after.sub(before)
	t.Logf("RenewMany of %d leases (5 unusual) took %s; requests that reached etcd: %s", n, took.Round(time.Millisecond), requests)
	// The 495 plain terms share one session, which AcquireMany remembered:
	// one LeaseTimeToLive (are their keys still attached?) and one
	// keep-alive renewed them all, with no read. The others take the
	// reading path (a Txn of 64 keys each), and the single Renews of the
	// expired lease and the new ttl add a keep-alive or a grant each.
	if ka := requests.msgs["LeaseKeepAlive"]; ka < 1 || ka > 3 {
		t.Errorf("%d keep-alives reached etcd, want 1 to 3 (one per session and single Renew)", ka)
	}
	if ttl := requests.started["LeaseTimeToLive"]; ttl != 1 {
		t.Errorf("%d LeaseTimeToLive, want 1 (one session)", ttl)
	}
	if g := requests.started["LeaseGrant"]; g != 1 {
		t.Errorf("%d grants, want 1 (the session of the new ttl)", g)
	}
	// 1 LeaseTimeToLive + 1 stream for the plain terms, 1 read + 1 stream +
	// 1 write for the unusual ones, and the single Renews of the expired
	// lease (read, keep-alive, write) and the new ttl (read, grant, write):
	// about 11. Renew per lease would have sent 1000.
	if total := requests.total(); total > 20 {
		t.Errorf("%d requests reached etcd for %d leases, want at most 20", total, n)
	}

	// Only plain leases now, on two sessions (the new ttl's too): a
	// LeaseTimeToLive per session and one stream, no read at all.
	var held []providers.Lease
	for i, l := range got {
		if errs[i] == nil {
			held = append(held, l)
		}
	}
	before = scrape(t, endpoint)
	start = time.Now()
	_, errs = p.RenewMany(ctx, held)
	took = time.Since(start)
	requests = scrape(t, endpoint).sub(before)
	for i, err := range errs {
		if err != nil {
			t.Errorf("second RenewMany, lease %s: %v", held[i].Key, err)
		}
	}
	t.Logf("RenewMany of %d plain leases took %s; requests: %s", len(held), took.Round(time.Millisecond), requests)
	if requests.total() != 3 || requests.started["Txn"] != 0 {
		t.Errorf("%s reached etcd for %d plain leases on 2 sessions, want 3 (2 LeaseTimeToLive, 1 stream) and no Txn", requests, len(held))
	}

	// For comparison, Renew per lease: two requests each (a read and a
	// keep-alive of the session).
	const singles = 50
	before = scrape(t, endpoint)
	start = time.Now()
	for _, l := range held[:singles] {
		if _, err := p.Renew(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	took = time.Since(start)
	requests = scrape(t, endpoint).sub(before)
	t.Logf("Renew of %d leases one by one took %s; requests: %s", singles, took.Round(time.Millisecond), requests)
	if requests.total() != 2*singles {
		t.Errorf("%d requests for %d single Renews, want %d: the comparison above is off", requests.total(), singles, 2*singles)
	}
}

// TestRenewManyCancelled: a ctx that has ended fails every lease with its
// error, never a lease verdict, and renews nothing.
func TestRenewManyCancelled(t *testing.T) {
	t.Parallel()
	endpoint, _ := teststore.StartEtcd(t)
	p := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	leases := acquireMany(t, p, 10, time.Minute)
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			_, errs := p.RenewMany(ctx, leases)
			for i, err := range errs {
				if !errors.Is(err, c.want) {
					t.Errorf("lease %d: %v, want %v", i, err, c.want)
				}
			}
		})
	}
}

// TestRenewManyLowMaxTxnOps: on a cluster run with --max-txn-ops below the
// default 128, the reads are split until they fit and the Value writes fall
// back to single Renews; every lease is still renewed.
func TestRenewManyLowMaxTxnOps(t *testing.T) {
	t.Parallel()
	endpoint := startEtcdWith(t, "--max-txn-ops", "16")
	p := open(t, Settings{Endpoints: []string{endpoint}, Prefix: randomPrefix(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leases := acquireMany(t, p, 100, time.Minute)
	cli, err := p.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gets := make([]clientv3.Op, 17)
	for i := range gets {
		gets[i] = clientv3.OpGet(p.leaseKey(leases[i].Key))
	}
	if _, err := cli.Txn(ctx).Then(gets...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Fatalf("a transaction of 17 Gets: %v, want %v: the flag did not take", err, rpctypes.ErrTooManyOps)
	}
	for i := range 40 { // one write of 40 keys: 80 compares
		leases[i].Value = fmt.Sprintf("v%d", i)
	}
	got, errs := p.RenewMany(ctx, leases)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		if got[i].Token != leases[i].Token {
			t.Fatalf("lease %d: %+v", i, got[i])
		}
	}
	for i := range 40 {
		if o, err := p.Observe(ctx, leases[i].Key); err != nil || o.Value != leases[i].Value {
			t.Fatalf("lease %d after RenewMany: %+v, %v; want value %q", i, o, err, leases[i].Value)
		}
	}
}

// acquireMany acquires job-000 ... for holder "a", a few at a time.
func acquireMany(t *testing.T, p *Provider, n int, ttl time.Duration) []providers.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leases := make([]providers.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			leases[i], errs[i] = p.Acquire(ctx, providers.AcquireRequest{Key: fmt.Sprintf("job-%03d", i), Holder: "a", TTL: ttl})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("acquire job-%03d: %v", i, err)
		}
	}
	return leases
}

// counts are etcd's gRPC counters by method: calls started (unary calls
// and streams) and messages received.
type counts struct {
	started map[string]int
	msgs    map[string]int
}

func (c counts) sub(o counts) counts {
	d := counts{started: map[string]int{}, msgs: map[string]int{}}
	for m, v := range c.started {
		if v != o.started[m] {
			d.started[m] = v - o.started[m]
		}
	}
	for m, v := range c.msgs {
		if v != o.msgs[m] {
			d.msgs[m] = v - o.msgs[m]
		}
	}
	return d
}

func (c counts) total() int {
	n := 0
	for _, v := range c.started {
		n += v
	}
	return n
}

func (c counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d in all (", c.total())
	sep := ""
	for _, m := range []string{"Txn", "Range", "Put", "LeaseGrant", "LeaseRevoke", "LeaseKeepAlive", "LeaseTimeToLive"} {
		if v := c.started[m]; v != 0 {
			fmt.Fprintf(&b, "%s%s %d", sep, m, v)
			sep = ", "
		}
	}
	fmt.Fprintf(&b, "); keep-alive messages %d", c.msgs["LeaseKeepAlive"])
	return b.String()
}

// scrape reads grpc_server_started_total and grpc_server_msg_received_total
// from etcd's /metrics, summed over services and types by method.
func scrape(t *testing.T, endpoint string) counts {
	t.Helper()
	resp, err := http.Get("http://" + endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	c := counts{started: map[string]int{}, msgs: map[string]int{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		var into map[string]int
		switch {
		case strings.HasPrefix(line, "grpc_server_started_total{"):
			into = c.started
		case strings.HasPrefix(line, "grpc_server_msg_received_total{"):
			into = c.msgs
		default:
			continue
		}
		_, rest, _ := strings.Cut(line, `grpc_method="`)
		method, _, _ := strings.Cut(rest, `"`)
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		into[method] += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(c.started) == 0 {
		t.Fatal("etcd's /metrics has no grpc_server_started_total")
	}
	return c
}

// startEtcdWith starts an etcd of its own with extra flags, as
// teststore.StartEtcd does.
func startEtcdWith(t *testing.T, flags ...string) string {
	t.Helper()
	bin, err := teststore.Tool("etcd", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clientPort, peerPort := teststore.MustFreePort(t), teststore.MustFreePort(t)
	client, peer := "http://"+teststore.Addr(clientPort), "http://"+teststore.Addr(peerPort)
	args := append([]string{bin,
		"--name", "default",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default=" + peer,
		"--initial-cluster-state", "new",
		"--logger", "zap",
		"--log-outputs", "stderr",
	}, flags...)
	proc, err := teststore.Start("etcd-"+strconv.Itoa(clientPort), dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	healthy := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
		}
		return nil
	}
	if err := proc.WaitReady(30*time.Second, healthy); err != nil {
		t.Fatal(err)
	}
	return teststore.Addr(clientPort)
}
