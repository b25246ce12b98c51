package agent

import "time"

// Clock is the loop's source of time. The real one reads Go's monotonic
// clock (time.Now carries a monotonic reading), so wall-clock jumps do not
// move deadlines.
type Clock interface {
	Now() time.Time
	// NewTimer sends the time on C once d has passed, unless stopped.
	NewTimer(d time.Duration) Timer
}

// Timer is one pending wake-up of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
