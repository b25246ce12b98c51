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

	mu      sync.Mutex
	queue   []hookItem
	busy    bool            // a goroutine works through the queue
	waiters []chan struct{} // closed when the queue is next empty
}

type hookItem struct {
	ev      config.Event
	actions []config.Action
	then    func()
}

// fire queues the actions for ev; then, when not nil, is called once its
// exec actions have finished (from another goroutine: it posts to the loop).
// A goroutine runs the queue while it is not empty: a job without hooks
// costs none.
func (h *hookRunner) fire(ev config.Event, actions []config.Action, then func()) {
	if h == nil { // a job without hooks
		if then != nil {
			then()
		}
		return
	}
	h.mu.Lock()
	if len(actions) == 0 && !h.busy {
		h.mu.Unlock()
		if then != nil {
			then()
		}
		return
	}
	h.queue = append(h.queue, hookItem{ev: ev, actions: actions, then: then})
	start := !h.busy
	h.busy = true
	h.mu.Unlock()
	if start {
		go h.drain()
	}
}

// idle returns a channel closed once nothing is queued or running.
func (h *hookRunner) idle() <-chan struct{} {
	ch := make(chan struct{})
	if h == nil {
		close(ch)
		return ch
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.busy {
		close(ch)
	} else {
		h.waiters = append(h.waiters, ch)
	}
	return ch
}

func (h *hookRunner) drain() {
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.busy = false
			for _, ch := range h.waiters {
				close(ch)
			}
			h.waiters = nil
			h.mu.Unlock()
			return
		}
		item := h.queue[0]
		h.queue = h.queue[1:]
		h.mu.Unlock()
		h.runItem(item)
		if item.then != nil {
			item.then()
		}
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
				h.log.Named("hooks").Warn("webhook not sent: this agent has no webhook sender", "event", item.ev.Type)
				continue
			}
			// The webhook sender has its own shutdown grace; the hook
			// runner's context must not cancel a delivery it queued.
			h.webhooks.Send(context.Background(), h.job, a.Webhook, item.ev)
		}
	}
}
