package agent

import "time"

// Clock is the loop's source of time. The real one reads Go's monotonic
// clock (time.Now carries a monotonic reading), so wall-clock jumps do not
// move deadlines.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
