package agent

// Agents learn about each other through membership records in the lease
// store itself: each agent holds one of memberSlots leases under the key
// "_electd.member.N" (job names cannot start with "_"), renews it every
// memberEvery with a small record (how many jobs it leads there, whether it
// drains, the jobs it can lead, the agents it sees under their share, its
// tags, the jobs it is preferred for and ready to take), and reads the
// others'. A record is alive exactly as long as its lease: the store judges
// expiry, as for the jobs. Balance (rebalance) and a drain's handovers
// (drainSome) act on what the records say.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

const (
	memberSlots  = 32
	memberPrefix = "_electd.member."
	memberEvery  = time.Second
	// movePause separates two handovers of one agent for balance.
	movePause = 250 * time.Millisecond
	// balanceDefer is the head start an agent under its share gets on a
	// free lease.
	balanceDefer = time.Second
	// maxRecord is what a membership record may take (a lease's value).
	maxRecord = providers.MaxValueLen
)

// record is one agent's membership record, as stored in its lease's value.
type record struct {
	Leading  int               `json:"n"`
	Draining bool              `json:"d,omitempty"`
	Can      string            `json:"c,omitempty"` // the jobs it can lead: a canSet, base64
	Held     string            `json:"h,omitempty"` // of those, the ones it holds off now: a holdSet, base64
	Tags     map[string]string `json:"t,omitempty"`
	Wants    []string          `json:"w,omitempty"` // jobs it is preferred for and ready to lead
	Seq      uint64            `json:"s,omitempty"` // counts its writes: a record that stops changing is an agent gone silent
	Under    string            `json:"u,omitempty"` // the agents it sees under their share: an underSet, base64; only from a balancing agent
	holder   string
	can      []byte  // Can, decoded; nil from an agent that does not publish it
	held     []byte  // Held, decoded; nil when it holds off none
	under    []byte  // Under, decoded; nil from an agent that does not balance (or is older)
	id       canBits // the holder's bits in an underSet
	heard    bool    // changed since the view before (or has no Seq)
}

// canSet is the set of jobs an agent can lead on a store, as a Bloom
// filter that fits a membership record (a lease value is at most 256
// bytes): the jobs it has configured (leader mode), whose constraint
// admits it, whose health check passes, while it does not drain. A job
// outside the set is certainly not one the agent can lead; a job in it
// almost certainly is (false positives: about 1 in 2,500 with 30 such jobs
// per agent and store, 1 in 100 with 100). Those it holds off now, after
// a term (for balance, preference, a step-down), are in a smaller set of
// the same kind: they count in its share, since the hold-off ends within a
// ttl, but it is not one to hand them to meanwhile.
type canSet [canBytes]byte

// holdSet is a canSet's smaller sibling: few jobs are held off at once.
type holdSet [holdBytes]byte

// underSet holds the agents (by holder) that a balancing agent sees under
// their share. An agent hands a job to one under its share only once every
// other balancing agent says it sees that one under too: they then defer
// to it for the job rather than take it themselves (deferral), however late
// their own views come.
type underSet [underBytes]byte

const (
	canBytes   = 80 // 640 bits, 107 characters of base64
	holdBytes  = 24 // 192 bits, 32 characters
	underBytes = 8  // 64 bits, 11 characters: few agents are under at once
	canHashes  = 3
)

// canBits are a job's bits in a canSet, from its name.
type canBits [canHashes]uint16

func canBitsOf(name string) canBits {
	sum := sha256.Sum256([]byte(name))
	var b canBits
	for i := range b {
		b[i] = binary.BigEndian.Uint16(sum[2*i:])
	}
	return b
}

// bloomAdd and bloomHas set and test a job's bits in a filter of any size.
func bloomAdd(s []byte, b canBits) {
	for _, i := range b {
		i %= uint16(len(s) * 8)
		s[i/8] |= 1 << (i % 8)
	}
}

func bloomHas(s []byte, b canBits) bool {
	for _, i := range b {
		i %= uint16(len(s) * 8)
		if s[i/8]&(1<<(i%8)) == 0 {
			return false
		}
	}
	return true
}

func encodeBloom(s []byte) string { return base64.RawStdEncoding.EncodeToString(s) }

// decodeBloom is the filter of n bytes that v encodes; nil when v is
// empty or not such a filter.
func decodeBloom(v string, n int) []byte {
	b, err := base64.RawStdEncoding.DecodeString(v)
	if v == "" || err != nil || len(b) != n {
		return nil
	}
	return b
}

// counts says whether the agent of record r takes a share of j: by its
// published set, or, from an agent that does not publish one, by its tags.
func (r record) counts(j *job) bool {
	if r.Draining {
		return false
	}
	if r.can != nil {
		return bloomHas(r.can, j.bits)
	}
	return matches(tagsOf(r), j.spec.Constraint)
}

// canLead says whether the agent of record r can take j now: it counts,
// and does not hold it off.
func (r record) canLead(j *job) bool {
	return r.counts(j) && (r.held == nil || !bloomHas(r.held, j.bits))
}

// countsHere says whether this agent takes a share of j (it leads it, or
// it would compete for it but for a hold-off): what it publishes in its
// canSet.
func (j *job) countsHere() bool {
	switch {
	case j.spec.Mode == config.ModeLock || j.retiring != nil || j.phase == retired:
		return false
	case j.phase == leading:
		return true
	}
	return j.eligible && !j.l.fleet.draining.Load() && j.healthy()
}

// heldHere says whether this agent, which counts for j, holds it off now.
func (j *job) heldHere() bool {
	return j.phase != leading && j.l.clock.Now().Before(j.holdOff)
}

// takers are the live agents, other than this one, that can lead j now.
func (m *members) takers(j *job) []record {
	var out []record
	for _, r := range m.view {
		if r.canLead(j) {
			out = append(out, r)
		}
	}
	return out
}

// members keeps this agent's record in one provider's store and reads the
// others'. Its goroutine does the store requests; what it learns is posted
// to the loop, which alone acts on it.
type members struct {
	l        *loop
	holder   string
	ttl      time.Duration
	log      hclog.Logger
	done     chan struct{}
	quit     chan struct{} // closed by leaveEarly: the agent is stopping
	quitOnce sync.Once

	// Owned by the goroutine.
	slot   int // -1 until one is held
	lease  providers.Lease
	span   int    // slots read: a few beyond the highest seen alive
	full   bool   // every slot was taken at the last try (logged once)
	writes uint64 // records written: the record's Seq

	// Owned by the loop.
	view        []record          // the other live agents
	before      map[string]record // the view before, by holder
	heard       map[string]heard  // by holder: when its record last changed
	wanted      map[string]bool   // jobs a live preferred agent is ready to lead
	target      int               // this agent's share of the provider's jobs
	othersUnder bool              // some other agent leads fewer than its share
	under       []record          // the other agents under their share
	ready       []record          // of those, the ones seen under in two views in a row
	underSince  map[string]int    // by holder: the view it was first seen under in
	seq         int               // views taken
	moved       int               // handovers since the view was read
	lastMove    time.Time
	moveTimer   *timer
	drainViews  int                // views taken since the drain began
	handed      map[*job]time.Time // handed over for balance, until seen led elsewhere (or a ttl passed)
	drainTimer  *timer             // the next drainSome
}

// startMembers begins keeping this agent's membership record on l's store.
func (l *loop) startMembers(holder string, ttl time.Duration, log hclog.Logger) {
	m := &members{l: l, holder: holder, ttl: ttl, log: log, done: make(chan struct{}), quit: make(chan struct{}), slot: -1, span: 4, wanted: map[string]bool{}}
	l.members = m
	go m.run()
}

// leaveEarly releases the membership record now, beside the jobs' stops,
// rather than once the loop has ended: the agent is stopping, and its write
// (with the notifications it sends the other agents) then does not fall
// between the release of a job and the next leader's Acquire of it.
func (m *members) leaveEarly() { m.quitOnce.Do(func() { close(m.quit) }) }

func memberKey(i int) string { return memberPrefix + strconv.Itoa(i) }

func (m *members) run() {
	defer close(m.done)
	// The record is released once the agent's context ends or it begins to
	// stop (leaveEarly), whichever comes first.
	ctx, cancel := context.WithCancel(m.l.ctx)
	defer cancel()
	go func() {
		select {
		case <-m.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer m.leave()
	for {
		reply := make(chan record, 1)
		m.l.post(func() { reply <- m.own() })
		var rec record
		select {
		case rec = <-reply:
			m.writes++
			rec.Seq = m.writes
		case <-ctx.Done():
			return
		}
		m.publish(ctx, rec)
		view := m.read(ctx)
		if ctx.Err() == nil {
			m.l.post(func() { m.update(view) })
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(memberEvery):
		}
	}
}

// publish takes a slot, or renews the one held, with rec as its value. The
// requests go through the loop, in the batches of the jobs' own.
func (m *members) publish(ctx context.Context, rec record) {
	value := encodeRecord(rec)
	timeout := min(m.ttl/2, 5*time.Second)
	if m.slot >= 0 {
		lease := m.lease
		lease.Value = value
		renewed, err := m.ask(ctx, func(done func(providers.Lease, error)) {
			m.l.renew(renewOp{lease: lease, timeout: timeout, done: done})
		})
		if err == nil {
			m.lease = renewed
			return
		}
		if ctx.Err() != nil {
			return // stopping: the slot stays known, for leave to release it
		}
		m.slot = -1 // lost or unknown: take a slot again
	}
	for i := 0; i < memberSlots; i++ {
		req := providers.AcquireRequest{Key: memberKey(i), Holder: m.holder, TTL: m.ttl}
		lease, err := m.ask(ctx, func(done func(providers.Lease, error)) {
			m.l.acquire(acquireOp{req: req, timeout: timeout, done: done})
		})
		if err != nil {
			if errors.Is(err, providers.ErrHeld) {
				continue
			}
			return // the store is down: the jobs' own requests report it
		}
		m.slot, m.lease, m.full = i, lease, false
		m.publish(ctx, rec) // its value
		return
	}
	if !m.full {
		m.full = true
		m.log.Warn("every membership slot on the store is taken: this agent still elects, but the others do not count it when they balance",
			"provider", m.l.ref, "slots", memberSlots)
	}
}

// ask queues a request on the loop and waits for its answer.
func (m *members) ask(ctx context.Context, queue func(done func(providers.Lease, error))) (providers.Lease, error) {
	type answer struct {
		lease providers.Lease
		err   error
	}
	ch := make(chan answer, 1)
	m.l.post(func() { queue(func(l providers.Lease, err error) { ch <- answer{l, err} }) })
	select {
	case a := <-ch:
		return a.lease, a.err
	case <-ctx.Done():
		return providers.Lease{}, ctx.Err()
	}
}

// read returns the other agents' live records.
func (m *members) read(ctx context.Context) []record {
	var out []record
	highest := m.slot
	for i := 0; i < min(memberSlots, max(m.span, m.slot+4)); i++ {
		if i == m.slot {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, min(m.ttl/2, 5*time.Second))
		lease, err := m.l.prov.Observe(rctx, memberKey(i))
		cancel()
		if err != nil || lease.Holder == "" || lease.Holder == m.holder {
			continue
		}
		var rec record
		if json.Unmarshal([]byte(lease.Value), &rec) != nil {
			continue
		}
		rec.holder, rec.id = lease.Holder, canBitsOf(lease.Holder)
		rec.can = decodeBloom(rec.Can, canBytes)
		rec.held = decodeBloom(rec.Held, holdBytes)
		rec.under = decodeBloom(rec.Under, underBytes)
		out = append(out, rec)
		highest = max(highest, i)
	}
	m.span = highest + 4
	return out
}

// leave releases the slot on a clean stop, so the others see at once that
// this agent is gone.
func (m *members) leave() {
	if m.slot < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(m.ttl, 5*time.Second))
	defer cancel()
	_ = m.l.prov.Release(ctx, m.lease)
}

func encodeRecord(rec record) string {
	b, _ := json.Marshal(rec)
	if len(b) > maxRecord && rec.Can != "" {
		rec.Tags = nil // the set says what the tags would: only old agents read them
		b, _ = json.Marshal(rec)
	}
	for len(b) > maxRecord && len(rec.Wants) > 0 {
		rec.Wants = rec.Wants[:len(rec.Wants)-1] // the rest on a later record
		b, _ = json.Marshal(rec)
	}
	if len(b) > maxRecord {
		rec.Tags = nil // config limits tags so that this does not happen
		b, _ = json.Marshal(rec)
	}
	return string(b)
}

// own is this agent's record now, on the loop.
func (m *members) own() record {
	l := m.l
	rec := record{Leading: l.leading, Draining: l.fleet.draining.Load(), Tags: maps.Clone(l.fleet.tags)}
	var can canSet
	var held holdSet
	anyHeld := false
	for _, j := range l.jobs {
		if j.countsHere() {
			bloomAdd(can[:], j.bits)
			if j.heldHere() {
				bloomAdd(held[:], j.bits)
				anyHeld = true
			}
		}
	}
	rec.Can = encodeBloom(can[:])
	if anyHeld {
		rec.Held = encodeBloom(held[:])
	}
	if l.fleet.balance && !rec.Draining {
		var under underSet // published even when empty: it says this agent takes part
		for _, r := range m.under {
			bloomAdd(under[:], r.id)
		}
		rec.Under = encodeBloom(under[:])
	}
	now := time.Now()
	for _, j := range l.placement().prefer {
		if j.phase == leading || j.phase == stopping || j.unfit() != "" ||
			!matches(l.fleet.tags, j.spec.Prefer) {
			continue
		}
		since := j.started
		if j.spec.Health != nil {
			since = j.health.passingSince
		}
		if now.Sub(since) >= j.spec.PreferSettle {
			rec.Wants = append(rec.Wants, j.spec.Name)
		}
	}
	sort.Strings(rec.Wants)
	delete(rec.Tags, config.TagNode) // the holder names the node
	return rec
}

// heard is when an agent's record last changed: its Seq, and the view
// that first read it.
type heard struct {
	seq  uint64
	view int
}

// silentViews is how many views in a row an agent's record may stay the
// same (it is written every memberEvery) before the agent counts as gone:
// killed, stopped or cut off from the store, though its lease lives on until
// the store expires it. A silent agent takes no share and is handed nothing.
const silentViews = 2

// update takes a fresh view of the other agents, on the loop.
func (m *members) update(view []record) {
	m.seq++
	live := view[:0]
	heardNow := make(map[string]heard, len(view))
	for _, r := range view {
		h, ok := m.heard[r.holder]
		if !ok || h.seq != r.Seq {
			h = heard{seq: r.Seq, view: m.seq}
		}
		heardNow[r.holder] = h
		if r.Seq != 0 && m.seq-h.view >= silentViews {
			continue // an older agent (no Seq) counts as long as its lease lives
		}
		r.heard = r.Seq == 0 || h.view == m.seq
		live = append(live, r)
	}
	m.heard = heardNow
	m.before = make(map[string]record, len(m.view))
	for _, r := range m.view {
		m.before[r.holder] = r
	}
	m.view, m.moved = live, 0
	m.l.fleet.views.Add(1)
	clear(m.wanted)
	for _, r := range view {
		for _, w := range r.Wants {
			m.wanted[w] = true
		}
	}
	m.rebalance()
}

// moveCost orders the jobs a balancing agent may hand over: leadership
// alone first, then scheduled tasks (nothing runs between slots), and a
// supervised command last, since moving it restarts the work. Among equals
// the youngest term goes.
func moveCost(j *job) int {
	switch {
	case j.spec.Run != nil:
		return 2
	case j.spec.Task != nil:
		return 1
	}
	return 0
}

// tagsOf is an agent's tags as placement sees them.
func tagsOf(r record) map[string]string {
	t := maps.Clone(r.Tags)
	if t == nil {
		t = map[string]string{}
	}
	t[config.TagNode] = NodeOf(r.holder)
	return t
}

// rebalance hands over what the fleet wants elsewhere: a job a ready
// preferred agent wants, at once; and, one at a time with a pause, the jobs
// beyond this agent's share while another agent is under its own.
func (m *members) rebalance() {
	l := m.l
	self := l.fleet.tags
	pl := l.placement()
	if !l.fleet.draining.Load() {
		m.drainViews = 0
	} else if m.drainViews++; m.drainViews > 2 {
		m.drainSome()
	}
	for _, j := range pl.prefer {
		if j.phase == leading && !matches(self, j.spec.Prefer) && m.wanted[j.spec.Name] {
			j.stepDown(ErrPreempted)
		}
	}
	m.target, m.othersUnder = math.MaxInt, false
	if !l.fleet.balance || l.fleet.draining.Load() {
		return
	}

	// Everyone's share: each job counts 1/k for each of the k live,
	// undrained agents that can lead it (this one included when it can):
	// an agent that has not got the job, or whose constraint or health
	// keeps it out, takes no share of it. One that holds it off for a
	// while takes its share, but is not handed it (underCanLead).
	var peers []record
	for _, r := range m.view {
		if !r.Draining {
			peers = append(peers, r)
		}
	}
	me := len(peers)
	loads := make([]int, me+1)
	for i, r := range peers {
		loads[i] = r.Leading
	}
	loads[me] = l.leading
	shares := make([]float64, me+1)
	admits := make([]bool, me+1)
	for _, j := range l.jobs {
		if j.spec.Mode == config.ModeLock {
			continue
		}
		k := 0
		for i, r := range peers {
			admits[i] = r.counts(j)
			if admits[i] {
				k++
			}
		}
		admits[me] = j.countsHere()
		if admits[me] {
			k++
		}
		for i := range admits {
			if admits[i] {
				shares[i] += 1 / float64(k)
			}
		}
	}
	targets := make([]int, me+1)
	deficit, excess := 0, 0
	m.under, m.ready = m.under[:0], m.ready[:0]
	since := make(map[string]int, len(m.underSince))
	for i, s := range shares {
		targets[i] = int(math.Ceil(s - 1e-9))
		switch d := loads[i] - targets[i]; {
		case d < 0 && i != me:
			deficit -= d
			h := peers[i].holder
			first, ok := m.underSince[h]
			if !ok {
				first = m.seq
			}
			since[h] = first
			m.under = append(m.under, peers[i])
			// Handed a job only once under in two views, and heard
			// from since the view before.
			if m.seq > first && peers[i].heard {
				m.ready = append(m.ready, peers[i])
			}
		case d > 0:
			excess += d
		}
	}
	m.underSince = since
	m.target, m.othersUnder = targets[me], deficit > 0
	over := loads[me] - targets[me]
	if over <= 0 || deficit == 0 {
		return
	}
	// This agent's part of the deficit, until the next view.
	allowance := int(math.Ceil(float64(deficit) * float64(over) / float64(excess)))
	if m.moved >= allowance {
		return
	}
	now := l.clock.Now()
	if wait := m.lastMove.Add(movePause).Sub(now); wait > 0 {
		if m.moveTimer == nil {
			m.moveTimer = l.after(wait, func() { m.moveTimer = nil; m.rebalance() })
		}
		return
	}
	// At most one handover in flight per agent ready to take one: a job
	// handed over counts until this agent sees another lead it, or for a
	// ttl. An agent killed while its record lives on is handed one job at
	// most, which waits for this agent's hold-off, not every job.
	inflight := 0
	for j, at := range m.handed {
		if j.phase == retired || now.Sub(at) >= j.spec.TTL {
			delete(m.handed, j)
			continue
		}
		if st := j.get(); st.Leader != "" && st.Leader != l.fleet.node && j.phase != leading {
			delete(m.handed, j)
			continue
		}
		inflight++
	}
	if inflight >= len(m.ready) {
		if inflight > 0 && m.moveTimer == nil {
			m.moveTimer = l.after(movePause, func() { m.moveTimer = nil; m.rebalance() })
		}
		return
	}
	// Only a job that an agent under its share can lead now, and could in
	// the view before, moves: one that no other agent can take stays here.
	// And only once every other balancing agent that could take the job
	// sees that agent under too: they defer to it then, rather than take
	// the job themselves. The view before: another agent's view may be a
	// view older than this one, and one that still saw the taker hold the
	// job off (after a handover of its own) would not defer to it.
	var pick *job
	for _, j := range l.jobs {
		if j.phase != leading || j.spec.Mode == config.ModeLock || len(j.spec.Prefer) > 0 ||
			!slices.ContainsFunc(m.ready, func(r record) bool {
				return r.canLead(j) && m.couldLeadBefore(r, j) && m.seenUnder(r, j)
			}) {
			continue
		}
		if pick == nil || moveCost(j) < moveCost(pick) ||
			(moveCost(j) == moveCost(pick) && (j.term.began.After(pick.term.began) || (j.term.began.Equal(pick.term.began) && j.spec.Name > pick.spec.Name))) {
			pick = j
		}
	}
	if pick == nil {
		return
	}
	m.moved++
	m.lastMove = now
	if m.handed == nil {
		m.handed = map[*job]time.Time{}
	}
	m.handed[pick] = now
	pick.log().Info("handing over to spread the jobs", "leading", loads[me], "share", targets[me])
	pick.stepDown(ErrBalanced)
	if m.moved < allowance && m.moveTimer == nil {
		m.moveTimer = l.after(movePause, func() { m.moveTimer = nil; m.rebalance() })
	}
}

// drainSome hands over the jobs a draining agent still leads, as soon as
// another agent can lead them: a few at a time (one per movePause, more
// when many are left), so that an agent that took one is not handed the
// next before the others (deferral). The drain waits two views first, so
// that the others have read this agent's record: they then count their
// shares without it.
func (m *members) drainSome() {
	l := m.l
	var left []*job
	for _, j := range l.jobs {
		if j.phase == leading && j.drainKept {
			left = append(left, j)
		}
	}
	slices.SortFunc(left, func(a, b *job) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	batch, moved := 1+len(left)/40, 0
	for _, j := range left {
		if moved == batch {
			if m.drainTimer == nil {
				m.drainTimer = l.after(movePause, func() { m.drainTimer = nil; m.drainSome() })
			}
			return
		}
		if d := j.drainLeader(true); !d.Kept {
			moved++
		}
	}
}

// seenUnder says whether every other balancing agent that could take j
// sees r under its share (by the record it last wrote).
func (m *members) seenUnder(r record, j *job) bool {
	for _, p := range m.view {
		if p.holder == r.holder || p.under == nil || !p.counts(j) {
			continue
		}
		if !bloomHas(p.under, r.id) {
			return false
		}
	}
	return true
}

// couldLeadBefore says whether the agent of record r could lead j in the
// view before this one.
func (m *members) couldLeadBefore(r record, j *job) bool {
	b, ok := m.before[r.holder]
	return ok && b.canLead(j)
}

// underCanLead says whether an agent under its share can lead j now.
func (m *members) underCanLead(j *job) bool {
	return slices.ContainsFunc(m.under, func(r record) bool { return r.canLead(j) })
}
