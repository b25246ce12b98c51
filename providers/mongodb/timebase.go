package mongodb

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// record is one entry of a key's log: a term begun, renewed or released.
// Entries are written once and never updated; the one with the highest slot
// is the lease's state. A document written by electd before the log (its
// _id the key itself, no slot) reads as slot 0 of its key.
type record struct {
	ID      bson.RawValue `bson:"_id"`
	Key     string        `bson:"key"`
	Slot    int64         `bson:"slot"`
	Holder  string        `bson:"holder"`
	Token   int64         `bson:"token"`
	Expires time.Time     `bson:"expires"`
	Value   string        `bson:"value"`
	// Expired and Left (milliseconds to the expiry) are computed by latest
	// and latestMany only, by the clock that judges expiry: the server's
	// ($$NOW, in the same aggregation that reads the record) or, on the
	// fallback path, this host's.
	Expired bool  `bson:"expired,omitempty"`
	Left    int64 `bson:"left,omitempty"`
}

// left is how long the term has left by the judging clock, 0 when expired.
func (r record) left() time.Duration {
	if r.Expired || r.Left <= 0 {
		return 0
	}
	return time.Duration(r.Left) * time.Millisecond
}

// entry is a record to write: slot is the next of the key's log, and the
// expiry is now + ttl by the judging clock (now itself for a release).
type entry struct {
	key    string
	slot   int64
	token  int64
	holder string
	value  string
	ttl    time.Duration
}

// entryID is the _id of a log entry. It is a document, so it never equals
// the string _id of a pre-log lease document, nor the capability probe's.
func entryID(key string, slot int64) bson.D {
	return bson.D{{Key: "k", Value: key}, {Key: "s", Value: slot}}
}

// timeBase builds the parts of each operation that involve the current
// time: by the server's clock where it can ($$NOW), else by the agent's.
type timeBase interface {
	// insert is the write of e as a new document with the _id of its slot:
	// it fails with a duplicate-key error when that slot is taken, whatever
	// the document there says. That is the only arbitration the provider
	// asks of the server.
	insert(e entry) mongo.WriteModel
	// latest returns the record of key with the highest slot, judged;
	// found is false for a key never acquired.
	latest(ctx context.Context, coll *mongo.Collection, key string) (rec record, found bool, err error)
	// latestMany does latest for many keys in one request; keys never
	// acquired are absent from the map.
	latestMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error)
	// serverClock reports whether expiries are judged by the server's clock.
	serverClock() bool
	// bulkLimit is the most writes one bulk request carries.
	bulkLimit() int
}

// ofKey matches every record of key: its log entries and a pre-log
// document.
func ofKey(key string) bson.D {
	return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "key", Value: key}}, bson.D{{Key: "_id", Value: key}}}}}
}

func ofKeys(keys []string) bson.D {
	in := bson.D{{Key: "$in", Value: keys}}
	return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "key", Value: in}}, bson.D{{Key: "_id", Value: in}}}}}
}

var newestFirst = bson.D{{Key: "slot", Value: -1}}

// serverTime needs update pipelines and $$NOW (MongoDB 4.2+). Strings from
// the caller go through $literal: in a pipeline a string starting with "$"
// would otherwise be read as a field path.
type serverTime struct{}

func (serverTime) serverClock() bool { return true }

// bulkLimit: MongoDB takes 100,000 writes per request; 1,000 keeps one
// request's work (and its outcome when it fails) small.
func (serverTime) bulkLimit() int { return 1000 }

// insert is an upsert whose filter never matches an existing document
// (every entry has a slot), so it can only insert, with the _id of the
// filter, and collides when the slot is taken. It is an upsert rather than
// an insert only so that a pipeline can write $$NOW + ttl.
func (s serverTime) insert(e entry) mongo.WriteModel {
	filter, update := s.insertParts(entryID(e.key, e.slot), e)
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
}

func (serverTime) insertParts(id any, e entry) (bson.D, mongo.Pipeline) {
	filter := bson.D{{Key: "_id", Value: id}, {Key: "slot", Value: bson.D{{Key: "$exists", Value: false}}}}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "key", Value: bson.D{{Key: "$literal", Value: e.key}}},
		{Key: "slot", Value: e.slot},
		{Key: "token", Value: e.token},
		{Key: "holder", Value: bson.D{{Key: "$literal", Value: e.holder}}},
		{Key: "expires", Value: plusNow(e.ttl)},
		{Key: "value", Value: bson.D{{Key: "$literal", Value: e.value}}},
	}}}}
	return filter, update
}

func (serverTime) latest(ctx context.Context, coll *mongo.Collection, key string) (record, bool, error) {
	cur, err := coll.Aggregate(ctx, judged(ofKey(key), true))
	if err != nil {
		return record{}, false, err
	}
	recs, err := decodeLatest(ctx, cur, nil)
	rec, found := recs[key]
	return rec, found, err
}

func (serverTime) latestMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error) {
	cur, err := coll.Aggregate(ctx, judged(ofKeys(keys), false))
	if err != nil {
		return nil, err
	}
	return decodeLatest(ctx, cur, nil)
}

// judged reads the records that match and judges them by the server's
// clock: expired, and the milliseconds left, with the one $$NOW of the
// aggregation. one keeps only the newest.
func judged(match bson.D, one bool) mongo.Pipeline {
	p := mongo.Pipeline{{{Key: "$match", Value: match}}}
	if one {
		p = append(p, bson.D{{Key: "$sort", Value: newestFirst}}, bson.D{{Key: "$limit", Value: 1}})
	}
	return append(p, bson.D{{Key: "$addFields", Value: bson.D{
		{Key: "expired", Value: bson.D{{Key: "$lte", Value: bson.A{"$expires", "$$NOW"}}}},
		{Key: "left", Value: bson.D{{Key: "$subtract", Value: bson.A{"$expires", "$$NOW"}}}},
	}}})
}

// decodeLatest reads a cursor of records and keeps the newest of each key,
// passing each through judge when it is not nil.
func decodeLatest(ctx context.Context, cur *mongo.Cursor, judge func(*record)) (map[string]record, error) {
	defer cur.Close(context.WithoutCancel(ctx))
	recs := map[string]record{}
	for cur.Next(ctx) {
		var rec record
		if err := cur.Decode(&rec); err != nil {
			return nil, err
		}
		if rec.Key == "" {
			// A pre-log document: its _id is the key, and it comes
			// before every entry of the log.
			s, ok := rec.ID.StringValueOK()
			if !ok {
				continue
			}
			rec.Key, rec.Slot = s, 0
		}
		if old, ok := recs[rec.Key]; ok && old.Slot >= rec.Slot {
			continue
		}
		if judge != nil {
			judge(&rec)
		}
		recs[rec.Key] = rec
	}
	return recs, cur.Err()
}

// plusNow is $$NOW + ttl; BSON dates have millisecond precision.
func plusNow(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", ttl.Milliseconds()}}}
}

// clientTime uses plain inserts and the agent's clock: the write is still
// arbitrated by the unique _id alone; only "now" comes from here.
type clientTime struct{ now func() time.Time }

func (clientTime) serverClock() bool { return false }

// bulkLimit: FerretDB v1.24 (the usual server of this path) never answers
// an update command of 100 statements or more, and then stops answering
// anything (TestBulkLimitFerretDB).
func (clientTime) bulkLimit() int { return 64 }

func (c clientTime) insert(e entry) mongo.WriteModel {
	return mongo.NewInsertOneModel().SetDocument(bson.D{
		{Key: "_id", Value: entryID(e.key, e.slot)},
		{Key: "key", Value: e.key},
		{Key: "slot", Value: e.slot},
		{Key: "token", Value: e.token},
		{Key: "holder", Value: e.holder},
		{Key: "expires", Value: c.now().Add(e.ttl)},
		{Key: "value", Value: e.value},
	})
}

var newestOne = options.Find().SetSort(newestFirst).SetLimit(1)

func (c clientTime) latest(ctx context.Context, coll *mongo.Collection, key string) (record, bool, error) {
	cur, err := coll.Find(ctx, ofKey(key), newestOne)
	if err != nil {
		return record{}, false, err
	}
	now := c.now()
	recs, err := decodeLatest(ctx, cur, func(r *record) { c.judge(r, now) })
	rec, found := recs[key]
	return rec, found, err
}

func (c clientTime) latestMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error) {
	cur, err := coll.Find(ctx, ofKeys(keys))
	if err != nil {
		return nil, err
	}
	now := c.now()
	return decodeLatest(ctx, cur, func(r *record) { c.judge(r, now) })
}

// judge judges r by this host's clock, as the fallback path's writes do.
func (clientTime) judge(r *record, now time.Time) {
	r.Expired = !r.Expires.After(now)
	r.Left = r.Expires.Sub(now).Milliseconds()
}
