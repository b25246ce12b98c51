package agent

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"

	"github.com/electd/electd/metrics"
)

// A command that writes without pause must not fill the agent's log (a
// loop printing as fast as it can wrote 3.3 GB in 40 s): a job's commands
// share a token bucket of log lines, and what it refuses is counted and
// said in one line at most every outputSummaryEvery, and when the command
// ends.
const (
	outputLinesPerSecond = 200  // sustained, for all of a job's commands
	outputBurst          = 2000 // lines at once, e.g. a stack trace
	outputSummaryEvery   = 10 * time.Second
)

// outputLimit is one job's bucket of log lines.
type outputLimit struct {
	job     string
	now     func() time.Time
	metrics *metrics.Metrics

	mu       sync.Mutex
	lim      *rate.Limiter
	dropped  int       // lines refused since the last summary
	lastSaid time.Time // the last summary
}

func newOutputLimit(job string, m *metrics.Metrics, now func() time.Time) *outputLimit {
	if now == nil {
		now = time.Now
	}
	return &outputLimit{job: job, now: now, metrics: m, lim: rate.NewLimiter(outputLinesPerSecond, outputBurst)}
}

// allow says whether a line may go to the log, and logs the summary of
// the lines dropped before it when it is due.
func (o *outputLimit) allow(log hclog.Logger) bool {
	if o == nil {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if !o.lim.AllowN(now, 1) {
		o.dropped++
		if o.metrics != nil {
			o.metrics.OutputDropped.WithLabelValues(o.job).Inc()
		}
		if o.lastSaid.IsZero() {
			o.lastSaid = now // the first summary comes one period after the first drop
		}
		return false
	}
	if o.dropped > 0 && now.Sub(o.lastSaid) >= outputSummaryEvery {
		o.summaryLocked(log, now)
	}
	return true
}

// summary logs the lines dropped since the last one, if any (a command
// ended).
func (o *outputLimit) summary(log hclog.Logger) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped > 0 {
		o.summaryLocked(log, o.now())
	}
}

func (o *outputLimit) summaryLocked(log hclog.Logger, now time.Time) {
	log.Warn("command output rate-limited: lines dropped from the log", "dropped", o.dropped,
		"limit_lines_per_second", outputLinesPerSecond)
	o.dropped, o.lastSaid = 0, now
}
