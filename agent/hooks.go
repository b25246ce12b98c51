package agent

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
)

// WebhookSender delivers webhooks asynchronously and in order per job
// (actions/webhook.Sender). Send must not block.
type WebhookSender interface {
	Send(ctx context.Context, job string, w *config.Webhook, ev config.Event)
}

// hookRunner runs one job's hooks one event at a time, in event order. A
// newer event waits for the running one; it never kills it (Patroni #2445,
// #1238). exec actions run to completion or their timeout; webhook actions
// are handed to the sender and never block.
type hookRunner struct {
	job      string
	log      hclog.Logger
	runner   *runner
	webhooks WebhookSender

	mu     sync.Mutex
	queue  []hookItem
	busy   bool // an item is running
	wake   chan struct{}
	closed bool
}

type hookItem struct {
	ev      config.Event
	actions []config.Action
	done    chan struct{}
}

func newHookRunner(job string, log hclog.Logger, r *runner, w WebhookSender) *hookRunner {
	return &hookRunner{job: job, log: log, runner: r, webhooks: w, wake: make(chan struct{}, 1)}
}

// fire queues the actions for ev and returns a channel closed once its exec
// actions have finished (at once when there are none and nothing is queued).
func (h *hookRunner) fire(ev config.Event, actions []config.Action) <-chan struct{} {
	done := make(chan struct{})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(actions) == 0 && len(h.queue) == 0 && !h.busy {
		close(done)
		return done
	}
	h.queue = append(h.queue, hookItem{ev: ev, actions: actions, done: done})
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return done
}

// run works through the queue until ctx is done and the queue is empty.
func (h *hookRunner) run(ctx context.Context) {
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.busy = false
			h.mu.Unlock()
			select {
			case <-h.wake:
				continue
			case <-ctx.Done():
				h.mu.Lock()
				empty := len(h.queue) == 0
				if empty {
					h.closed = true
				}
				h.mu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		item := h.queue[0]
		h.queue = h.queue[1:]
		h.busy = true
		h.mu.Unlock()
		h.runItem(item)
		close(item.done)
	}
}

func (h *hookRunner) runItem(item hookItem) {
	for i := range item.actions {
		a := &item.actions[i]
		switch a.Kind {
		case config.ActionExec:
			h.runner.exec(item.ev, a.Exec)
		case config.ActionWebhook:
			if h.webhooks == nil {
				h.log.Warn("webhook not sent: this agent has no webhook sender", "event", item.ev.Type)
				continue
			}
			// The webhook sender has its own shutdown grace; the hook
			// runner's context must not cancel a delivery it queued.
			h.webhooks.Send(context.Background(), h.job, a.Webhook, item.ev)
		}
	}
}
