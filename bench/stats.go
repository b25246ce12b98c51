package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// sample is a set of measured durations.
type sample []time.Duration

// pct is the nearest-rank percentile: the smallest value with at least p%
// of the sample at or below it. With 30 values p99 is the maximum; the
// tables print both so nobody reads more into p99 than the runs hold.
func (s sample) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	v := slices.Clone(s)
	slices.Sort(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	rank = max(rank, 1)
	return v[rank-1]
}

func (s sample) max() time.Duration { return s.pct(100) }

// cell prints a duration for a table: milliseconds below 10 s, seconds above.
func cell(d time.Duration) string {
	if d < 0 {
		return "−" + cell(-d)
	}
	switch {
	case d == 0:
		return "0"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// pcts prints "p50 / p99 / max" of s, or "—" when nothing was measured.
func pcts(s sample) []string {
	if len(s) == 0 {
		return []string{"—", "—", "—"}
	}
	return []string{cell(s.pct(50)), cell(s.pct(99)), cell(s.max())}
}

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.head, " | "))
	seps := make([]string, len(t.head))
	for i := range seps {
		seps[i] = "---"
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(seps, " | "))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}
