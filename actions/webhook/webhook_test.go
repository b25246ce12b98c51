package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/syncbuf"
	"github.com/electd/electd/providers/registry"
)

// webhookFrom loads a one-job configuration whose on_leader_change holds the
// given webhook block body, and returns that webhook as the agent would get it.
func webhookFrom(t *testing.T, body string) *config.Webhook {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf("job \"billing\" {\n  on_leader_change {\n    webhook {\n%s\n    }\n  }\n}\n", body)
	path := filepath.Join(dir, "hook.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load([]string{path}, config.Options{Types: registry.Types(), Default: registry.Default})
	if diags.HasErrors() {
		var b bytes.Buffer
		diags.WriteText(&b)
		t.Fatalf("config: %s", b.String())
	}
	return cfg.Jobs[0].OnLeaderChange[0].Webhook
}

func event(token uint64) config.Event {
	return config.Event{
		Type: config.EventLeaderChange, Job: "billing", Node: "web-2", Leader: "web-2",
		PreviousLeader: "web-1", Token: token, Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
	}
}

// receiver is a real HTTP server that records what it gets and answers
// with the statuses it is told, in turn (the last one repeats).
//
// With secret set it checks each request's X-Electd-Signature-256 the way a
// receiver would, with its own HMAC code rather than this package's Sign.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []*received
	statuses []int
	hang     chan struct{} // when set, requests block until it is closed
	header   http.Header   // extra response headers
	secret   string
}

type received struct {
	header   http.Header
	body     []byte
	at       time.Time
	verified bool // the signature matched the body with the receiver's secret
}

// verify is what a receiver does with a delivery: HMAC-SHA256 of the raw
// body, compared in constant time with the header.
func verify(secret string, body []byte, header string) bool {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	return hmac.Equal([]byte(want), []byte(header))
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	return newReceiverOn(t, nil, statuses...)
}

// newReceiverOn serves on l (nil: a fresh loopback port).
func newReceiverOn(t *testing.T, l net.Listener, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if l != nil {
		r.Listener.Close()
		r.Listener = l
	}
	r.Start()
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hang != nil {
			select {
			case <-r.hang:
			default:
				close(r.hang)
			}
		}
		r.mu.Unlock()
		r.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, &received{req.Header.Clone(), body, time.Now(),
		r.secret != "" && verify(r.secret, body, req.Header.Get("X-Electd-Signature-256"))})
	hang := r.hang
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status = r.statuses[min(n, len(r.statuses)-1)]
	}
	for k, v := range r.header {
		w.Header()[k] = v
	}
	r.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
}

func (r *receiver) requests() []*received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*received(nil), r.got...)
}

// results collects OnResult calls.
type results struct {
	mu  sync.Mutex
	all []string
}

func (r *results) add(job, event, result string) {
	r.mu.Lock()
	r.all = append(r.all, job+" "+result)
	r.mu.Unlock()
}

func (r *results) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.all {
		if strings.HasSuffix(x, " "+s) {
			n++
		}
	}
	return n
}

func (r *results) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

func newSender(t *testing.T, res *results, opts Options) *Sender {
	opts.BaseBackoff = 20 * time.Millisecond
	opts.Version = "test"
	if res != nil {
		opts.OnResult = res.add
	}
	s := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDefaultPayloadSignedAndHeaders(t *testing.T) {
	rcv := newReceiver(t)
	rcv.secret = "s3cr3t-hook"
	t.Setenv("TEST_HOOK_SECRET", "s3cr3t-hook")
	w := webhookFrom(t, fmt.Sprintf(`url = %q
      secret = env("TEST_HOOK_SECRET")
      headers = { "X-Team" = "ops" }`, rcv.URL+"/hook"))
	res := &results{}
	s := newSender(t, res, Options{})
	s.Send(context.Background(), "billing", w, event(7))
	waitFor(t, "one result", func() bool { return res.total() == 1 })

	reqs := rcv.requests()
	if len(reqs) != 1 || res.count(ResultOK) != 1 {
		t.Fatalf("requests %d, results %v; want one delivered", len(reqs), res.all)
	}
	r := reqs[0]
	var payload map[string]string
	if err := json.Unmarshal(r.body, &payload); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.body)
	}
	want := map[string]string{"type": "leader_change", "job": "billing", "node": "web-2", "leader": "web-2",
		"previous_leader": "web-1", "token": "7", "time": "2026-11-22T10:00:00Z"}
	for k, v := range want {
		if payload[k] != v {
			t.Errorf("payload %s = %q, want %q", k, payload[k], v)
		}
	}
	if !r.verified {
		t.Errorf("signature %q does not verify against the body received", r.header.Get("X-Electd-Signature-256"))
	}
	for h, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "electd/test",
		"X-Electd-Event": "leader_change", "X-Team": "ops"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if r.header.Get("X-Electd-Delivery") == "" {
		t.Error("no X-Electd-Delivery header")
	}
}

func TestCustomBodySlackStyle(t *testing.T) {
	rcv := newReceiver(t)
	w := webhookFrom(t, fmt.Sprintf(`url = %q
      body = jsonencode({ text = "${event.leader} now leads ${event.job} (token ${event.token})" })`, rcv.URL))
	res := &results{}
	s := newSender(t, res, Options{})
	s.Send(context.Background(), "billing", w, event(12))
	waitFor(t, "delivery", func() bool { return res.total() == 1 })
	got := string(rcv.requests()[0].body)
	if want := `{"text":"web-2 now leads billing (token 12)"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	if h := rcv.requests()[0].header.Get("X-Electd-Signature-256"); h != "" {
		t.Errorf("unsigned webhook sent a signature %q", h)
	}
}

func TestRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int
		attempts int
		requests int
		result   string
	}{
		{"500 then 200 is retried", []int{500, 200}, 5, 2, ResultOK},
		{"503 502 then 204", []int{503, 502, 204}, 5, 3, ResultOK},
		{"408 is retried", []int{408, 200}, 5, 2, ResultOK},
		{"429 is retried", []int{429, 200}, 5, 2, ResultOK},
		{"400 is final", []int{400, 200}, 5, 1, ResultFailed},
		{"404 is final", []int{404}, 5, 1, ResultFailed},
		{"gives up after max_attempts", []int{500}, 3, 3, ResultFailed},
		{"a redirect is not followed", []int{302}, 3, 1, ResultFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			rcv.secret = "retry-secret"
			w := webhookFrom(t, fmt.Sprintf("url = %q\n secret = %q\n max_attempts = %d", rcv.URL, rcv.secret, tc.attempts))
			res := &results{}
			s := newSender(t, res, Options{})
			s.Send(context.Background(), "billing", w, event(1))
			waitFor(t, "result", func() bool { return res.total() == 1 })
			reqs := rcv.requests()
			if len(reqs) != tc.requests || res.count(tc.result) != 1 {
				t.Fatalf("%d requests and results %v, want %d requests and %s", len(reqs), res.all, tc.requests, tc.result)
			}
			id := reqs[0].header.Get("X-Electd-Delivery")
			for i, r := range reqs {
				if got := r.header.Get("X-Electd-Delivery"); got != id {
					t.Errorf("attempt %d has delivery id %q, want the first attempt's %q", i+1, got, id)
				}
				if !bytes.Equal(r.body, reqs[0].body) {
					t.Errorf("attempt %d sent a different body", i+1)
				}
				if !r.verified {
					t.Errorf("attempt %d: signature does not verify", i+1)
				}
			}
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		retryAfter string
		min, max   time.Duration // gap between the two attempts
	}{
		// The control: with a 20ms base backoff, a retry comes quickly, so
		// the waits below are Retry-After's doing.
		{"429 without Retry-After uses the backoff", 429, "", 0, 500 * time.Millisecond},
		{"429 with Retry-After in seconds", 429, "1", 900 * time.Millisecond, 5 * time.Second},
		{"503 with Retry-After as an HTTP date", 503, "date", 900 * time.Millisecond, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.status, 200)
			switch tc.retryAfter {
			case "":
			case "date": // HTTP dates have whole seconds: 2s ahead waits at least 1s
				rcv.header = http.Header{"Retry-After": {time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)}}
			default:
				rcv.header = http.Header{"Retry-After": {tc.retryAfter}}
			}
			w := webhookFrom(t, fmt.Sprintf("url = %q", rcv.URL))
			res := &results{}
			s := newSender(t, res, Options{})
			s.Send(context.Background(), "billing", w, event(1))
			waitFor(t, "result", func() bool { return res.total() == 1 })
			reqs := rcv.requests()
			if len(reqs) != 2 || res.count(ResultOK) != 1 {
				t.Fatalf("%d requests, results %v; want 2 requests and ok", len(reqs), res.all)
			}
			if gap := reqs[1].at.Sub(reqs[0].at); gap < tc.min || gap > tc.max {
				t.Errorf("retried %s after the first attempt, want between %s and %s", gap, tc.min, tc.max)
			}
		})
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	s := New(Options{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	cases := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},  // capped at MaxBackoff
		{40, 500 * time.Millisecond, time.Second}, // no overflow
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint("attempt ", tc.attempt), func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 200 {
				d := s.backoff(tc.attempt)
				if d < tc.min || d > tc.max {
					t.Fatalf("backoff %s, want within [%s, %s]", d, tc.min, tc.max)
				}
				seen[d] = true
			}
			// Jitter: 200 draws from a range of millions of nanoseconds.
			if len(seen) < 100 {
				t.Errorf("only %d distinct waits in 200 draws: no jitter", len(seen))
			}
		})
	}
}

// Sign matches the published test vector of GitHub's webhook signatures,
// which use the same scheme.
func TestSignKnownAnswer(t *testing.T) {
	got := Sign("It's a Secret to Everybody", []byte("Hello, World!"))
	if want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

// A block's headers cannot forge the headers receivers verify with.
func TestBlockHeadersCannotReplaceElectdHeaders(t *testing.T) {
	rcv := newReceiver(t)
	rcv.secret = "k"
	w := webhookFrom(t, fmt.Sprintf(`url = %q
      secret = "k"
      headers = { "X-Electd-Signature-256" = "sha256=00", "X-Electd-Delivery" = "fixed", "X-Electd-Event" = "elected", "Content-Type" = "application/vnd.test+json" }`, rcv.URL))
	res := &results{}
	s := newSender(t, res, Options{})
	s.Send(context.Background(), "billing", w, event(1))
	waitFor(t, "result", func() bool { return res.total() == 1 })
	r := rcv.requests()[0]
	if !r.verified {
		t.Errorf("signature %q replaced by the block's header", r.header.Get("X-Electd-Signature-256"))
	}
	if got := r.header.Get("X-Electd-Delivery"); got == "fixed" || got == "" {
		t.Errorf("X-Electd-Delivery = %q, want a generated id", got)
	}
	if got := r.header.Get("X-Electd-Event"); got != "leader_change" {
		t.Errorf("X-Electd-Event = %q, want leader_change", got)
	}
	if got := r.header.Get("Content-Type"); got != "application/vnd.test+json" {
		t.Errorf("Content-Type = %q, want the block's own", got)
	}
}

func TestTimeoutAndConnectionRefused(t *testing.T) {
	t.Run("a receiver that hangs past the timeout", func(t *testing.T) {
		rcv := newReceiver(t)
		rcv.hang = make(chan struct{})
		w := webhookFrom(t, fmt.Sprintf("url = %q\n timeout = \"100ms\"\n max_attempts = 3", rcv.URL))
		res := &results{}
		s := newSender(t, res, Options{})
		start := time.Now()
		s.Send(context.Background(), "billing", w, event(1))
		waitFor(t, "result", func() bool { return res.total() == 1 })
		reqs := rcv.requests()
		if len(reqs) != 3 || res.count(ResultFailed) != 1 {
			t.Fatalf("%d attempts, results %v; want 3 attempts then failed", len(reqs), res.all)
		}
		// Each attempt waited out its own timeout before the next began.
		for i := 1; i < len(reqs); i++ {
			if gap := reqs[i].at.Sub(reqs[i-1].at); gap < 100*time.Millisecond {
				t.Errorf("attempt %d began %s after the previous one, before its 100ms timeout", i+1, gap)
			}
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("3 attempts of 100ms took %s: the timeout is not per attempt", took)
		}
	})

	// freeAddr is a loopback address nothing listens on.
	freeAddr := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}

	t.Run("connection refused until the receiver comes up", func(t *testing.T) {
		addr := freeAddr(t)
		w := webhookFrom(t, fmt.Sprintf("url = %q\n max_attempts = 10", "http://"+addr+"/hook"))
		res := &results{}
		var logs syncbuf.Buffer
		s := newSender(t, res, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})})
		s.Send(context.Background(), "billing", w, event(1))
		waitFor(t, "a refused attempt", func() bool { return strings.Contains(logs.String(), "retrying") })

		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("the address was taken meanwhile: %v", err)
		}
		rcv := newReceiverOn(t, l)
		waitFor(t, "result", func() bool { return res.total() == 1 })
		if res.count(ResultOK) != 1 || len(rcv.requests()) != 1 {
			t.Errorf("results %v, %d requests; want delivered once the receiver listened", res.all, len(rcv.requests()))
		}
	})

	t.Run("connection refused every time", func(t *testing.T) {
		w := webhookFrom(t, fmt.Sprintf("url = %q\n max_attempts = 3", "http://"+freeAddr(t)+"/hook"))
		res := &results{}
		var logs syncbuf.Buffer
		s := newSender(t, res, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})})
		s.Send(context.Background(), "billing", w, event(1))
		waitFor(t, "result", func() bool { return res.total() == 1 })
		if res.count(ResultFailed) != 1 {
			t.Errorf("results %v, want failed", res.all)
		}
		if n := strings.Count(logs.String(), "retrying"); n != 2 {
			t.Errorf("%d retries logged, want 2 (3 attempts):\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "connection refused") {
			t.Errorf("the network error is not logged:\n%s", logs.String())
		}
	})
}

func TestOrderedPerJobAndNeverBlocking(t *testing.T) {
	rcv := newReceiver(t, 500, 200) // the first delivery needs a retry
	slow := newReceiver(t)
	slow.hang = make(chan struct{})
	w := webhookFrom(t, fmt.Sprintf("url = %q", rcv.URL))
	hung := webhookFrom(t, fmt.Sprintf("url = %q\n timeout = \"30s\"", slow.URL))
	res := &results{}
	s := newSender(t, res, Options{})

	start := time.Now()
	for i := 0; i < 3; i++ { // a job whose receiver hangs...
		s.Send(context.Background(), "stuck", hung, event(uint64(i)))
	}
	for i := 1; i <= 20; i++ { // ...does not hold up another job
		s.Send(context.Background(), "billing", w, event(uint64(i)))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Send blocked for %s", took)
	}
	waitFor(t, "20 deliveries of billing", func() bool { return res.count(ResultOK) == 20 })
	var tokens []string
	for _, r := range rcv.requests()[1:] { // the first request was the failed attempt
		var p map[string]string
		json.Unmarshal(r.body, &p)
		tokens = append(tokens, p["token"])
	}
	for i, tok := range tokens {
		if want := fmt.Sprint(i + 1); tok != want {
			t.Fatalf("deliveries out of order: %v", tokens)
		}
	}
	if n := len(slow.requests()); n != 1 {
		t.Errorf("the hung job's receiver got %d requests, want 1 in flight", n)
	}
	close(slow.hang)
}

func TestQueueOverflowIsCounted(t *testing.T) {
	slow := newReceiver(t)
	slow.hang = make(chan struct{})
	w := webhookFrom(t, fmt.Sprintf("url = %q\n timeout = \"30s\"", slow.URL))
	res := &results{}
	var logs bytes.Buffer
	s := New(Options{QueueSize: 2, BaseBackoff: time.Millisecond, OnResult: res.add,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})})
	for i := 0; i < 10; i++ {
		s.Send(context.Background(), "billing", w, event(uint64(i)))
	}
	// One in flight, at most two queued: at least seven dropped, each counted.
	if n := res.count(ResultDropped); n < 7 {
		t.Errorf("%d dropped, want at least 7", n)
	}
	if !strings.Contains(logs.String(), "queue is full") {
		t.Errorf("overflow not logged:\n%s", logs.String())
	}
	// A stop that cannot wait drops what is left, and says so for each.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); err == nil {
		t.Error("Close returned nil while a delivery hung")
	}
	if res.total() != 10 {
		t.Errorf("%d outcomes for 10 deliveries: %v", res.total(), res.all)
	}
}

func TestCloseWaitsForPendingDeliveries(t *testing.T) {
	rcv := newReceiver(t, 500, 200)
	w := webhookFrom(t, fmt.Sprintf("url = %q", rcv.URL))
	res := &results{}
	s := New(Options{BaseBackoff: 50 * time.Millisecond, OnResult: res.add})
	for i := 0; i < 3; i++ {
		s.Send(context.Background(), "billing", w, event(uint64(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := res.count(ResultOK); n != 3 {
		t.Errorf("%d delivered before Close returned, want 3 (results %v)", n, res.all)
	}
	s.Send(context.Background(), "billing", w, event(9)) // after Close: dropped, not sent
	if res.count(ResultDropped) != 1 {
		t.Errorf("a delivery after Close was not dropped: %v", res.all)
	}
}

func TestTLSVerifiedWithCAFile(t *testing.T) {
	var mu sync.Mutex
	conns, got := 0, 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra, want string
		conns, requests   int
	}{
		// A certificate the client does not trust will not be trusted on
		// the next attempt either: one connection, no retry.
		{"unknown CA is refused, not retried", "", ResultFailed, 1, 0},
		{"ca_file makes it trusted", fmt.Sprintf("ca_file = %q", ca), ResultOK, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			conns, got = 0, 0
			mu.Unlock()
			w := webhookFrom(t, fmt.Sprintf("url = %q\n max_attempts = 3\n %s", srv.URL, tc.extra))
			res := &results{}
			s := newSender(t, res, Options{})
			s.Send(context.Background(), "billing", w, event(1))
			waitFor(t, "result", func() bool { return res.total() == 1 })
			if res.count(tc.want) != 1 {
				t.Errorf("results %v, want %s", res.all, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if conns != tc.conns || got != tc.requests {
				t.Errorf("%d connections and %d requests, want %d and %d", conns, got, tc.conns, tc.requests)
			}
		})
	}
}

func TestSecretsNotLogged(t *testing.T) {
	rcv := newReceiver(t, 500)
	t.Setenv("TEST_HOOK_SECRET", "s3cr3t-hook")
	url := rcv.URL + "/services/T000/B000/XSECRETPATH"
	w := webhookFrom(t, fmt.Sprintf(`url = %q
      secret = env("TEST_HOOK_SECRET")
      headers = { Authorization = "Bearer tok-SECRETHEADER" }
      max_attempts = 2`, url))
	var logs bytes.Buffer
	res := &results{}
	s := New(Options{BaseBackoff: time.Millisecond, OnResult: res.add,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})})
	s.Send(context.Background(), "billing", w, event(1))
	waitFor(t, "result", func() bool { return res.total() == 1 })
	s.Close(context.Background())
	for _, secret := range []string{"s3cr3t-hook", "XSECRETPATH", "SECRETHEADER"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log shows %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "giving up") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
}

// A URL's userinfo, path and query never reach the log, whatever the
// attempt's failure: an answer of 500, a refused connection, or a TLS
// handshake with a plain HTTP server, whose errors net/http wraps in a
// *url.Error quoting the URL (scheme lower-cased, password masked, query
// kept); an upper-case scheme included.
func TestURLCredentialsNotLogged(t *testing.T) {
	rcv := newReceiver(t, 500)
	host := strings.TrimPrefix(rcv.URL, "http://")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	const rest = "://hookuser:PASSWORD-c4n4ry@%s/hooks/SECRETPATH-c4n4ry?token=TOKEN-c4n4ry&x=1"
	tests := []struct{ name, url, host string }{
		{"answer 500", "http" + rest, host},
		{"answer 500, upper-case scheme", "HTTP" + rest, host},
		{"connection refused", "http" + rest, refused},
		{"connection refused, upper-case scheme", "HTTP" + rest, refused},
		{"TLS to a plain HTTP server", "HTTPS" + rest, host},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := webhookFrom(t, fmt.Sprintf("url = %q\n max_attempts = 2", fmt.Sprintf(tt.url, tt.host)))
			var logs syncbuf.Buffer
			res := &results{}
			s := newSender(t, res, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})})
			s.Send(context.Background(), "billing", w, event(1))
			waitFor(t, "result", func() bool { return res.total() == 1 })
			out := logs.String()
			for _, secret := range []string{"PASSWORD", "SECRETPATH", "TOKEN", "hookuser", "c4n4ry"} {
				if strings.Contains(out, secret) {
					t.Errorf("log shows %q:\n%s", secret, out)
				}
			}
			scheme, _, _ := strings.Cut(tt.url, ":")
			if want := strings.ToLower(scheme) + "://" + tt.host; !strings.Contains(out, "url="+want+" ") {
				t.Errorf("log does not name %s:\n%s", want, out)
			}
			if !strings.Contains(out, "retrying") {
				t.Errorf("no retry logged:\n%s", out)
			}
		})
	}
}
