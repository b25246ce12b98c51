package faults

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// pauseGrace is how long after SIGCONT a resumed leader may take to notice
// that its term is over and stop its child, beyond stop_timeout: it has to
// be scheduled again, see its timer fire and signal the group.
const pauseGrace = 2 * time.Second

// report is what the checker found in one run.
type report struct {
	store    string
	elapsed  time.Duration
	faults   map[string]int
	nFaults  int
	children int

	gaps     map[string][]time.Duration // leaderless time after each fault, by kind
	spurious []gap                      // leaderless time no fault explains
	overlaps []overlap                  // two run children alive at once

	accepted, fenced int // work writes accepted, and rejected as stale
	violations       []string
	slots            map[string]*slotStats
	failures         []string       // everything that fails the run
	observed         map[string]int // how the agent-side faults went (cluster.note)
}

type gap struct{ from, to time.Time }

type overlap struct {
	from, to     time.Time
	older, newer string
	olderToken   uint64
	whilePaused  bool
}

type slotStats struct {
	runs, dup, coalesced, lostInFault, lost int
	// overran counts slots skipped because the run of the slot before
	// was still running (the agent's overlap rule), as on a machine so
	// loaded that a one-second task took longer than a second.
	overran int
}

// check applies the rules to one run's history. end is when the scheduler
// stopped injecting and the shutdown began.
//
//   - Tokens: run children start with tokens that never go down; an equal
//     token is only a restart of the child on the same node in one term.
//   - Fencing: accepted writes never go down in token (the recorder's own
//     rule, checked again on its log); a write rejected as stale is allowed
//     only from a child whose agent was paused (SIGSTOP until SIGCONT plus
//     stop_timeout and pauseGrace). Any other stale write is a second leader.
//   - Overlap: two run children alive at once is allowed only while the
//     older one's agent was paused, in the same window. A grandchild (a
//     process a child started in a session of its own) is a life of its own:
//     beside its own parent it is one piece of work, beside any other child
//     it is held to the same rule.
//   - Gaps: time with no run child alive, attributed to the fault before it;
//     a gap no fault explains is reported as spurious.
//   - Slots, per task job: a slot run twice is a failure. A slot missing
//     between two runs is "coalesced" when the leader changed in between
//     (mode leader: the new leader runs only the latest missed slot), "lost
//     in a fault" within a fault's window (none for noSlotWindow), and lost
//     otherwise (a failure).
func check(h history, faults []faultRec, pauses []window, end time.Time) *report {
	r := &report{faults: map[string]int{}, gaps: map[string][]time.Duration{}, slots: map[string]*slotStats{},
		children: len(h.children), nFaults: len(faults)}
	for _, f := range faults {
		r.faults[f.kind]++
	}
	for _, e := range h.errs {
		r.failures = append(r.failures, "recorder: "+e)
	}
	pausedDuring := func(node string, from, to time.Time) bool {
		for _, w := range pauses {
			wto := end
			if !w.to.IsZero() {
				wto = w.to.Add(stopTimeout + pauseGrace)
			}
			if w.node == node && !from.Before(w.from) && !to.After(wto) {
				return true
			}
		}
		return false
	}
	endOf := func(c childLife) time.Time {
		if c.ended {
			return c.end
		}
		return end
	}
	violate := func(format string, a ...any) { r.violations = append(r.violations, fmt.Sprintf(format, a...)) }

	kids := append([]childLife(nil), h.children...)
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].start.Before(kids[j].start) })
	for i := 1; i < len(kids); i++ {
		p, c := kids[i-1], kids[i]
		if c.token < p.token || (c.token == p.token && c.node != p.node) {
			violate("token: child of %s started with token %d after a child of %s with token %d", c.node, c.token, p.node, p.token)
		}
	}

	byID := map[int]childLife{}
	for _, c := range h.children {
		byID[c.id] = c
	}
	var highest uint64
	for _, w := range h.writes {
		c := byID[w.child]
		if !w.accepted {
			r.fenced++
			if !pausedDuring(c.node, w.at, w.at) {
				violate("fencing: a write of %s with token %d was stale (highest accepted %d) at %s while its agent was not paused: two leaders",
					c.node, w.token, w.highest, w.at.Format("15:04:05.000"))
			}
			continue
		}
		r.accepted++
		if w.token < highest {
			violate("fencing: a write with token %d was accepted after token %d", w.token, highest)
		}
		highest = max(highest, w.token)
	}

	for i := range kids {
		for j := i + 1; j < len(kids); j++ {
			a, b := kids[i], kids[j]
			if !b.start.Before(endOf(a)) || (b.sub && b.parent == a.id) {
				continue
			}
			to := endOf(a)
			if e := endOf(b); e.Before(to) {
				to = e
			}
			o := overlap{from: b.start, to: to, older: a.node, newer: b.node, olderToken: a.token}
			o.whilePaused = pausedDuring(a.node, o.from, o.to)
			r.overlaps = append(r.overlaps, o)
			if !o.whilePaused {
				violate("overlap: the child of %s (token %d) ran %s beside the child of %s (token %d) from %s, and %s was not paused",
					a.node, a.token, o.to.Sub(o.from).Round(time.Millisecond), b.node, b.token, o.from.Format("15:04:05.000"), a.node)
			}
		}
	}

	// Leaderless time, from the first child to the end of the run.
	if len(kids) > 0 {
		covered := endOf(kids[0])
		for _, c := range kids[1:] {
			if c.start.After(covered) {
				r.addGap(gap{covered, c.start}, faults)
			}
			if e := endOf(c); e.After(covered) {
				covered = e
			}
		}
		if covered.Before(end) {
			r.addGap(gap{covered, end}, faults)
		}
	}

	inFault := func(t time.Time) bool {
		for _, f := range faults {
			if noSlotWindow[f.kind] {
				continue
			}
			if !t.Before(f.from.Add(-slotEvery)) && !t.After(f.to.Add(ttl+2*time.Second)) {
				return true
			}
		}
		return false
	}
	runs := map[string][]slotRun{}
	for _, s := range h.slots {
		runs[s.job] = append(runs[s.job], s)
	}
	for job, rs := range runs {
		st := &slotStats{runs: len(rs)}
		r.slots[job] = st
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].slot.Before(rs[j].slot) })
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			if b.slot.Equal(a.slot) {
				st.dup++
				r.failures = append(r.failures, fmt.Sprintf("slots: %s ran slot %s twice (%s token %d, %s token %d)",
					job, b.slot.UTC().Format(time.RFC3339), a.node, a.token, b.node, b.token))
				continue
			}
			if b.token < a.token || (job == jobTickLock && b.token == a.token) {
				violate("slots: %s ran slot %s under token %d after slot %s under token %d",
					job, b.slot.UTC().Format(time.RFC3339), b.token, a.slot.UTC().Format(time.RFC3339), a.token)
			}
			for s := a.slot.Add(slotEvery); s.Before(b.slot); s = s.Add(slotEvery) {
				switch {
				case job == jobTickLead && b.token != a.token:
					st.coalesced++
				case !a.end.IsZero() && a.end.After(s):
					st.overran++
				case inFault(s):
					st.lostInFault++
				default:
					st.lost++
					r.failures = append(r.failures, fmt.Sprintf("slots: %s lost slot %s outside any fault (runs before and after: %s token %d, %s token %d)",
						job, s.UTC().Format(time.RFC3339), a.node, a.token, b.node, b.token))
				}
			}
		}
	}
	for _, job := range []string{jobTickLead, jobTickLock} {
		if r.slots[job] == nil || r.slots[job].runs < 2 {
			r.failures = append(r.failures, fmt.Sprintf("slots: job %s ran fewer than two slots", job))
		}
	}
	r.failures = append(r.failures, r.violations...)
	return r
}

// noSlotWindow are the faults in which no task slot may be lost: reloads
// (rejected, or changing only the worker job) stop no agent and leave the
// task jobs alone.
var noSlotWindow = map[string]bool{faultHUP: true, faultBadReload: true, faultCannotStart: true}

// addGap attributes g to the fault it follows: one that began before it
// and had not been over for longer than ttl plus a margin.
func (r *report) addGap(g gap, faults []faultRec) {
	for i := len(faults) - 1; i >= 0; i-- {
		f := faults[i]
		if !g.from.Before(f.from.Add(-100*time.Millisecond)) && !g.from.After(f.to.Add(ttl+3*time.Second)) {
			r.gaps[f.kind] = append(r.gaps[f.kind], g.to.Sub(g.from))
			return
		}
	}
	r.spurious = append(r.spurious, g)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func (r *report) allGaps() []time.Duration {
	var all []time.Duration
	for _, g := range r.gaps {
		all = append(all, g...)
	}
	return all
}

func (r *report) pausedOverlaps() (n int, longest time.Duration) {
	for _, o := range r.overlaps {
		if o.whilePaused {
			n++
			longest = max(longest, o.to.Sub(o.from))
		}
	}
	return n, longest
}

// text is the per-run report for the test log.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d faults in %s, %d run children started\n", r.store, r.nFaults, r.elapsed.Round(time.Second), r.children)
	kinds := make([]string, 0, len(r.faults))
	for k := range r.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		g := r.gaps[k]
		fmt.Fprintf(&b, "  %-14s ×%-3d leaderless gaps: %d, p50 %s, max %s\n", k, r.faults[k], len(g),
			percentile(g, 0.5).Round(time.Millisecond), percentile(g, 1).Round(time.Millisecond))
	}
	for _, g := range r.spurious {
		fmt.Fprintf(&b, "  spurious gap (no fault): %s at %s\n", g.to.Sub(g.from).Round(time.Millisecond), g.from.Format("15:04:05.000"))
	}
	n, longest := r.pausedOverlaps()
	fmt.Fprintf(&b, "  overlaps: %d while the older leader was paused (longest %s), %d otherwise\n",
		n, longest.Round(time.Millisecond), len(r.overlaps)-n)
	fmt.Fprintf(&b, "  writes: %d accepted, %d fenced (stale token rejected); violations: %d\n", r.accepted, r.fenced, len(r.violations))
	for _, job := range []string{jobTickLead, jobTickLock} {
		if s := r.slots[job]; s != nil {
			fmt.Fprintf(&b, "  %-11s slots run %d, duplicated %d, coalesced by a failover %d, skipped while the run before still ran %d, lost in faults %d, lost otherwise %d\n",
				job, s.runs, s.dup, s.coalesced, s.overran, s.lostInFault, s.lost)
		}
	}
	obs := make([]string, 0, len(r.observed))
	for k := range r.observed {
		obs = append(obs, k)
	}
	sort.Strings(obs)
	for _, k := range obs {
		fmt.Fprintf(&b, "  %s: ×%d\n", k, r.observed[k])
	}
	fmt.Fprintf(&b, "  failures: %d", len(r.failures))
	return b.String()
}

// summaryTable is one Markdown row per store.
func summaryTable(rs []*report) string {
	var b strings.Builder
	b.WriteString("| store | faults | time | gaps p50 / p99 / max | spurious gaps | overlaps (paused / other) | fenced writes | violations | tick-leader run / dup / coalesced / lost in faults / lost | tick-lock run / dup / lost in faults / lost | failures |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		g := r.allGaps()
		n, _ := r.pausedOverlaps()
		sl := func(job string) *slotStats {
			if s := r.slots[job]; s != nil {
				return s
			}
			return &slotStats{}
		}
		lead, lock := sl(jobTickLead), sl(jobTickLock)
		fmt.Fprintf(&b, "| %s | %d | %s | %s / %s / %s | %d | %d / %d | %d | %d | %d / %d / %d / %d / %d | %d / %d / %d / %d | %d |\n",
			r.store, r.nFaults, r.elapsed.Round(time.Second),
			percentile(g, 0.5).Round(time.Millisecond), percentile(g, 0.99).Round(time.Millisecond), percentile(g, 1).Round(time.Millisecond),
			len(r.spurious), n, len(r.overlaps)-n, r.fenced, len(r.violations),
			lead.runs, lead.dup, lead.coalesced, lead.lostInFault, lead.lost,
			lock.runs, lock.dup, lock.lostInFault, lock.lost, len(r.failures))
	}
	return b.String()
}
