package mongodb

import (
	"context"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"

	"github.com/electd/electd/providers"
)

// cleanEvery: a write whose slot is a multiple of it deletes the key's
// entries older than the one it follows, so that a key keeps at most
// cleanEvery+1 entries (and a renewal costs a delete once in cleanEvery).
const cleanEvery = 8

// term is the newest slot this provider wrote for a term it holds, so that
// a renewal or release writes the next slot without reading first.
type term struct {
	holder string
	token  int64
	slot   int64
}

// lastSlot returns the slot of the entry this provider last wrote for
// lease's term, if it wrote one.
func (p *Provider) lastSlot(l providers.Lease) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.terms[l.Key]
	if !ok || t.holder != l.Holder || uint64(t.token) != l.Token {
		return 0, false
	}
	return t.slot, true
}

func (p *Provider) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.terms, key)
}

// wrote records a written entry: the slot of a term held, and, once in
// cleanEvery slots, the deletion of the entries before the previous one.
// The newest two stay: a candidate that read the previous entry collides
// with this one, and no read ever finds the log empty.
func (p *Provider) wrote(ctx context.Context, e entry) {
	p.remember(e)
	if e.slot%cleanEvery != 0 {
		return
	}
	if _, err := p.coll.DeleteMany(ctx, oldEntries(e)); err != nil {
		p.log.Debug("could not delete old entries", "key", e.key, "error", err)
	}
}

func (p *Provider) remember(e entry) {
	if e.holder == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.terms[e.key] = term{holder: e.holder, token: e.token, slot: e.slot}
}

// oldEntries matches the entries of e's key before the one e follows.
func oldEntries(e entry) bson.D {
	return bson.D{{Key: "key", Value: e.key}, {Key: "slot", Value: bson.D{{Key: "$lt", Value: e.slot - 1}}}}
}

// cleanups are the deletions due after entries es were written.
func cleanups(es []entry) []mongo.WriteModel {
	var ms []mongo.WriteModel
	for _, e := range es {
		if e.slot%cleanEvery == 0 {
			ms = append(ms, mongo.NewDeleteManyModel().SetFilter(oldEntries(e)))
		}
	}
	return ms
}
