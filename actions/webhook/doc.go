// Package webhook delivers electd's webhook actions (docs/webhooks.md): signed JSON
// POSTs, retried with exponential backoff and jitter, asynchronous and in
// event order per job, so a slow receiver never blocks an election loop or
// another job's deliveries.
package webhook
