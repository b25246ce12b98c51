package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/providers"
)

// A release is one transaction that deletes the lease key and writes the
// record, so the Notify watch that wakes a candidate has also seen the
// key's whole state at that revision. The candidate's AcquireMany writes
// its term guarded by that state instead of reading it first: the guard is
// the one a read would give (both keys' ModRevisions), so a key that
// changed since fails the transaction and is read as before. On a handover
// that is a round trip less, as etcd's own election has no read there.
const (
	// freedFresh is how long a release the watch saw is used without a
	// read: a candidate acquires within milliseconds of hearing it, and
	// any later change of the key replaces the entry anyway.
	freedFresh = time.Second
	// maxFreed bounds the entries kept (releases nobody took).
	maxFreed = 1024
)

// errRetry leaves a request of AcquireMany to Acquire (writePlaced).
var errRetry = errors.New("acquire again")

type freedKey struct {
	st   state
	seen time.Time
}

// sawEvents records, from one watch response, the job keys released in it
// (lease key deleted and record written at one revision), and forgets any
// other key it touches.
func (p *Provider) sawEvents(evs []*clientv3.Event) {
	// Most responses are acquires (puts): with nothing recorded and no
	// delete among them there is nothing to record or forget.
	p.fmu.Lock()
	none := len(p.freed) == 0
	p.fmu.Unlock()
	if none && !slices.ContainsFunc(evs, func(ev *clientv3.Event) bool { return ev.Type == clientv3.EventTypeDelete }) {
		return
	}
	type change struct {
		deleted int64 // revision of the lease key's deletion
		rec     *mvccpb.KeyValue
	}
	changes := map[string]*change{}
	at := func(key string) *change {
		c := changes[key]
		if c == nil {
			c = &change{}
			changes[key] = c
		}
		return c
	}
	for _, ev := range evs {
		name := string(ev.Kv.Key)
		if key, ok := p.jobKey(name); ok {
			c := at(key)
			c.deleted = 0
			if ev.Type == clientv3.EventTypeDelete {
				c.deleted = ev.Kv.ModRevision
			}
		} else if key, ok := p.recordOf(name); ok {
			at(key).rec = ev.Kv
		}
	}
	now := time.Now()
	p.fmu.Lock()
	defer p.fmu.Unlock()
	for key, c := range changes {
		delete(p.freed, key)
		if c.deleted == 0 || c.rec == nil || c.rec.ModRevision != c.deleted || c.rec.Value == nil {
			continue
		}
		st := state{recordRev: c.rec.ModRevision, revision: c.rec.ModRevision}
		if json.Unmarshal(c.rec.Value, &st.rec) != nil {
			continue
		}
		if len(p.freed) >= maxFreed {
			for k, f := range p.freed {
				if now.Sub(f.seen) > freedFresh {
					delete(p.freed, k)
				}
			}
			if len(p.freed) >= maxFreed {
				continue
			}
		}
		if p.freed == nil {
			p.freed = make(map[string]freedKey)
		}
		p.freed[key] = freedKey{st: st, seen: now}
	}
}

// forgetFreed drops every release seen: the watch may have missed changes.
func (p *Provider) forgetFreed() {
	p.fmu.Lock()
	clear(p.freed)
	p.fmu.Unlock()
}

// recordOf returns the job key whose record key is name.
func (p *Provider) recordOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, p.prefix)
	if !ok {
		return "", false
	}
	key, ok := strings.CutSuffix(rest, recordSuffix)
	if !ok || key == "" || strings.Contains(key, "/") {
		return "", false
	}
	return key, true
}

// takeFreed moves, out of idx and keys, the requests whose key the watch
// saw released lately, and returns them with the states seen. Each entry is
// used once.
func (p *Provider) takeFreed(reqs []providers.AcquireRequest, idx []int, keys []string) (restIdx []int, restKeys []string, fidx []int, fstates []state) {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	if len(p.freed) == 0 {
		return idx, keys, nil, nil
	}
	now := time.Now()
	for n, i := range idx {
		f, ok := p.freed[reqs[i].Key]
		if ok {
			delete(p.freed, reqs[i].Key)
		}
		if ok && now.Sub(f.seen) <= freedFresh {
			fidx, fstates = append(fidx, i), append(fstates, f.st)
			continue
		}
		restIdx, restKeys = append(restIdx, i), append(restKeys, keys[n])
	}
	return restIdx, restKeys, fidx, fstates
}

// acquireFreed writes the terms of released keys (fidx, with the states the
// watch saw) on their sessions as they stand, while the refresh that
// refreshAhead sent at since is under way, and then takes that refresh's
// answer as the terms' start, as acquireRead does after its session call. A
// key with no live session, or whose session expired before the refresh,
// is left to Acquire (returned).
func (p *Provider) acquireFreed(ctx context.Context, cli *clientv3.Client, since time.Time, reqs []providers.AcquireRequest, secs []int64, fidx []int, fstates []state, out []providers.Lease, fail func(int, error)) (retry []int) {
	var placed []*newTerm
	for n, i := range fidx {
		p.smu.Lock()
		s, ok := p.sessions[secs[i]]
		p.smu.Unlock()
		if !ok || !time.Now().Before(s.expires()) {
			retry = append(retry, i)
			continue
		}
		placed = append(placed, &newTerm{i: i, st: fstates[n], id: s.id, token: providers.NextToken(fstates[n].rec.Token, reqs[i].Floor)})
	}
	confirm := func(t *newTerm) error {
		sess, err := p.session(ctx, cli, secs[t.i], since)
		if err != nil {
			return err
		}
		if sess.id != t.id {
			// The session expired after the write: etcd deleted the
			// key with it.
			return errRetry
		}
		t.ttl, t.at = sess.ttl, sess.at
		return nil
	}
	return append(retry, p.writePlaced(ctx, cli, reqs, secs, placed, out, fail, confirm)...)
}
