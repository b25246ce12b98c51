package agent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/actions/webhook"
)

// hookReceiver is a real webhook endpoint. Until released it holds every
// request open and then fails it with a 500; after that it accepts. It
// verifies each signature the way a receiver would and records the
// deliveries it accepted, in arrival order.
type hookReceiver struct {
	*httptest.Server
	secret string

	mu       sync.Mutex
	release  chan struct{}
	held     []string // delivery ids of requests that hung and then failed
	accepted []hookDelivery
	bad      []string // what did not verify
}

type hookDelivery struct {
	id, header string // X-Electd-Delivery, X-Electd-Event
	Type       string `json:"type"`
	Node       string `json:"node"`
	Leader     string `json:"leader"`
	Previous   string `json:"previous_leader"`
	Token      string `json:"token"`
}

func (d hookDelivery) String() string {
	return fmt.Sprintf("%s(leader=%q previous=%q token=%s)", d.Type, d.Leader, d.Previous, d.Token)
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	r := &hookReceiver{secret: secret, release: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.open()
		r.Close()
	})
	return r
}

func (r *hookReceiver) open() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("X-Electd-Delivery")
	m := hmac.New(sha256.New, []byte(r.secret))
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(req.Header.Get("X-Electd-Signature-256"))) {
		r.mu.Lock()
		r.bad = append(r.bad, string(body))
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest) // final: shows up as a missing delivery too
		return
	}
	select {
	case <-r.release:
	default:
		select {
		case <-r.release:
		case <-req.Context().Done():
			return
		}
		r.mu.Lock()
		r.held = append(r.held, id)
		r.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	d := hookDelivery{id: id, header: req.Header.Get("X-Electd-Event")}
	if err := json.Unmarshal(body, &d); err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, string(body))
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.accepted = append(r.accepted, d)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// of returns the deliveries accepted from node, in arrival order.
func (r *hookReceiver) of(node string) []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookDelivery
	for _, d := range r.accepted {
		if d.Node == node {
			out = append(out, d)
		}
	}
	return out
}

// hookResults counts a Sender's outcomes.
type hookResults struct {
	mu  sync.Mutex
	all []string
}

func (h *hookResults) add(job, event, result string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, event+":"+result)
}

func (h *hookResults) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.all)
}

// webhookAgent starts node with its own real webhook sender.
func webhookAgent(t *testing.T, node, db, job string) (*testAgent, *webhook.Sender, *hookResults) {
	t.Helper()
	res := &hookResults{}
	s := webhook.New(webhook.Options{
		Logger:      hclog.New(&hclog.LoggerOptions{Name: node + ".webhook", Level: hclog.Debug, Output: testWriter{t}}),
		Version:     "test",
		BaseBackoff: 50 * time.Millisecond,
		OnResult:    res.add,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	a := startAgent(t, loadConfig(t, agentConfig(node, db, job)), func(o *Options) { o.Webhooks = s })
	return a, s, res
}

// Leadership moves between agents while their webhook receiver hangs: the
// elections go on at their usual pace, and once the receiver answers
// (first with a 500, then normally) every delivery arrives, signed, once,
// in event order per node: elected before leader_change, on_leader_change
// on followers too with previous_leader, on_demoted only where the node led.
func TestWebhooksWhileLeadershipMoves(t *testing.T) {
	db := sqliteDB(t)
	rcv := newHookReceiver(t, "hook-secret")
	hook := fmt.Sprintf(`webhook {
      url          = %q
      secret       = "hook-secret"
      timeout      = "30s"
      max_attempts = 5
    }`, rcv.URL+"/electd")
	job := fmt.Sprintf(`
job "billing" {
%s
  on_elected {
    %[2]s
  }
  on_demoted {
    %[2]s
  }
  on_leader_change {
    %[2]s
  }
}`, quick, hook)

	// Term 1: node-1 leads; node-2 joins as a follower. Neither node's
	// first delivery gets an answer.
	a1, s1, res1 := webhookAgent(t, "node-1", db, job)
	eventually(t, 10*time.Second, "node-1 leads", func() bool { return a1.job("billing").state == "leader" })
	a2, s2, res2 := webhookAgent(t, "node-2", db, job)
	eventually(t, 10*time.Second, "node-2 follows node-1", func() bool { return a2.job("billing").leader == "node-1" })

	// Term 2: a step-down hands over to node-2 as fast as without webhooks
	// (SQLite has no notification: the next retry_every of 200ms).
	start := time.Now()
	if err := a1.StepDown(context.Background(), "billing"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node-2 leads", func() bool { return a2.job("billing").state == "leader" })
	t.Logf("step-down → node-2 leads: %s, while the receiver hangs", time.Since(start).Round(time.Millisecond))
	eventually(t, 10*time.Second, "node-1 sees node-2 lead", func() bool { return a1.job("billing").leader == "node-2" })

	// Term 3: node-2 stops; node-1 takes over once its hold-off ends.
	start = time.Now()
	a2.stop(t)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("node-2 took %s to stop: the hung receiver held up shutdown", took)
	}
	eventually(t, 10*time.Second, "node-1 leads again", func() bool { return a1.job("billing").state == "leader" })

	// node-3 joins and leaves as a follower: it saw no change of leader and
	// never led, so it has nothing to deliver.
	a3, s3, res3 := webhookAgent(t, "node-3", db, job)
	eventually(t, 10*time.Second, "node-3 follows node-1", func() bool { return a3.job("billing").leader == "node-1" })
	a3.stop(t)
	a1.stop(t)

	// Every delivery so far waited behind the first one of its node.
	rcv.mu.Lock()
	accepted := len(rcv.accepted)
	rcv.mu.Unlock()
	if accepted != 0 {
		t.Fatalf("%d deliveries accepted while the receiver hung", accepted)
	}
	rcv.open()
	for _, s := range []*webhook.Sender{s1, s2, s3} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := s.Close(ctx); err != nil {
			t.Errorf("deliveries left at close: %v", err)
		}
		cancel()
	}

	want := map[string][]string{
		"node-1": {
			`elected(leader="node-1" previous="" token=1)`,
			`leader_change(leader="node-1" previous="" token=1)`,
			`demoted(leader="" previous="node-1" token=1)`,
			`leader_change(leader="node-2" previous="node-1" token=2)`,
			`elected(leader="node-1" previous="node-2" token=3)`,
			`leader_change(leader="node-1" previous="node-2" token=3)`,
			`demoted(leader="" previous="node-1" token=3)`,
		},
		"node-2": {
			`elected(leader="node-2" previous="node-1" token=2)`,
			`leader_change(leader="node-2" previous="node-1" token=2)`,
			`demoted(leader="" previous="node-2" token=2)`,
		},
		"node-3": nil,
	}
	for node, w := range want {
		var got []string
		for _, d := range rcv.of(node) {
			got = append(got, d.String())
			if d.header != d.Type {
				t.Errorf("%s: X-Electd-Event %q on a %s payload", node, d.header, d.Type)
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s delivered, in order:\n  %s\nwant:\n  %s", node, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
	}

	// The requests that hung were failed with a 500 and retried under the
	// same delivery id: each one was accepted exactly once.
	rcv.mu.Lock()
	held, bad := slices.Clone(rcv.held), slices.Clone(rcv.bad)
	ids := map[string]int{}
	for _, d := range rcv.accepted {
		ids[d.id]++
	}
	rcv.mu.Unlock()
	if len(held) != 2 {
		t.Errorf("%d requests hung, want 2: the first delivery of node-1 and of node-2", len(held))
	}
	for _, id := range held {
		if ids[id] != 1 {
			t.Errorf("delivery %s hung, failed, and was then accepted %d times, want once", id, ids[id])
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("delivery %s accepted %d times", id, n)
		}
	}
	if len(bad) > 0 {
		t.Errorf("deliveries that did not verify: %q", bad)
	}
	for node, res := range map[string]*hookResults{"node-1": res1, "node-2": res2, "node-3": res3} {
		for _, r := range res.list() {
			if !strings.HasSuffix(r, ":"+webhook.ResultOK) {
				t.Errorf("%s: outcome %s, want every delivery ok", node, r)
			}
		}
		if n := len(res.list()); n != len(want[node]) {
			t.Errorf("%s: %d outcomes reported, want %d", node, n, len(want[node]))
		}
	}
}
