package mongodb

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
)

// record is a lease document; _id (the key) is known to the caller and not
// decoded, so the capability probe, whose _id is a document, fits too.
type record struct {
	Holder  string    `bson:"holder"`
	Token   int64     `bson:"token"`
	Expires time.Time `bson:"expires"`
	Value   string    `bson:"value"`
	// Expired and Left (milliseconds to the expiry) are computed by read and
	// readMany only, by the clock that judges expiry: the server's ($$NOW,
	// in the same aggregation that reads the record) or, on the fallback
	// path, this host's.
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

// timeBase builds the parts of each operation that involve the current
// time: by the server's clock where it can ($$NOW), else by the agent's.
type timeBase interface {
	// acquire: the filter matching a free, expired or own lease on key, and
	// the update starting a new term (token + 1; value kept, "" when new).
	acquire(key any, holder string, ttl time.Duration) (filter bson.D, update any)
	renew(ttl time.Duration, value string) any
	release(value string) any
	// read returns the record of key and whether it has expired; found is
	// false for a key never acquired.
	read(ctx context.Context, coll *mongo.Collection, key any) (rec record, expired, found bool, err error)
	// readMany reads the records of keys in one request, Expired and Left
	// set; keys never acquired are absent from the map.
	readMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error)
	// serverClock reports whether expiries are judged by the server's clock.
	serverClock() bool
	// bulkLimit is the most writes one bulk request carries.
	bulkLimit() int
}

// serverTime needs update pipelines and $$NOW (MongoDB 4.2+). Strings from
// the caller go through $literal: in a pipeline a string starting with "$"
// would otherwise be read as a field path.
type serverTime struct{}

func (serverTime) serverClock() bool { return true }

// bulkLimit: MongoDB takes 100,000 writes per request; 1,000 keeps one
// request's work (and its outcome when it fails) small.
func (serverTime) bulkLimit() int { return 1000 }

func (serverTime) acquire(key any, holder string, ttl time.Duration) (bson.D, any) {
	filter := bson.D{{Key: "_id", Value: key}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "holder", Value: holder}},
		bson.D{{Key: "holder", Value: ""}},
		bson.D{{Key: "$expr", Value: bson.D{{Key: "$lte", Value: bson.A{"$expires", "$$NOW"}}}}},
	}}}
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "holder", Value: bson.D{{Key: "$literal", Value: holder}}},
		{Key: "token", Value: bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$token", int64(0)}}}, int64(1)}}}},
		{Key: "expires", Value: plusNow(ttl)},
		{Key: "value", Value: bson.D{{Key: "$ifNull", Value: bson.A{"$value", ""}}}},
	}}}}
	return filter, update
}

func (serverTime) renew(ttl time.Duration, value string) any {
	return mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "expires", Value: plusNow(ttl)},
		{Key: "value", Value: bson.D{{Key: "$literal", Value: value}}},
	}}}}
}

func (serverTime) release(value string) any {
	return mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "holder", Value: ""},
		{Key: "expires", Value: "$$NOW"},
		{Key: "value", Value: bson.D{{Key: "$literal", Value: value}}},
	}}}}
}

func (serverTime) read(ctx context.Context, coll *mongo.Collection, key any) (record, bool, bool, error) {
	cur, err := coll.Aggregate(ctx, judged(bson.D{{Key: "_id", Value: key}}))
	if err != nil {
		return record{}, false, false, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	if !cur.Next(ctx) {
		return record{}, false, false, cur.Err()
	}
	var rec record
	if err := cur.Decode(&rec); err != nil {
		return record{}, false, false, err
	}
	return rec, rec.Expired, true, nil
}

func (serverTime) readMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error) {
	cur, err := coll.Aggregate(ctx, judged(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}))
	if err != nil {
		return nil, err
	}
	return decodeKeyed(ctx, cur, nil)
}

// judged reads the records that match and judges them by the server's
// clock: expired, and the milliseconds left, with the one $$NOW of the
// aggregation.
func judged(match bson.D) mongo.Pipeline {
	return mongo.Pipeline{
		{{Key: "$match", Value: match}},
		{{Key: "$addFields", Value: bson.D{
			{Key: "expired", Value: bson.D{{Key: "$lte", Value: bson.A{"$expires", "$$NOW"}}}},
			{Key: "left", Value: bson.D{{Key: "$subtract", Value: bson.A{"$expires", "$$NOW"}}}},
		}}},
	}
}

// decodeKeyed reads the records of a cursor by key, passing each through
// judge when it is not nil.
func decodeKeyed(ctx context.Context, cur *mongo.Cursor, judge func(*record)) (map[string]record, error) {
	defer cur.Close(context.WithoutCancel(ctx))
	recs := map[string]record{}
	for cur.Next(ctx) {
		var id struct {
			ID string `bson:"_id"`
		}
		var rec record
		if err := cur.Decode(&id); err != nil {
			return nil, err
		}
		if err := cur.Decode(&rec); err != nil {
			return nil, err
		}
		if judge != nil {
			judge(&rec)
		}
		recs[id.ID] = rec
	}
	return recs, cur.Err()
}

// plusNow is $$NOW + ttl; BSON dates have millisecond precision.
func plusNow(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", ttl.Milliseconds()}}}
}

// clientTime uses plain update operators and the agent's clock. The write
// is still one atomic findAndModify on MongoDB; only "now" comes from here.
type clientTime struct{ now func() time.Time }

func (clientTime) serverClock() bool { return false }

// bulkLimit: FerretDB v1.24 (the usual server of this path) never answers
// an update command of 100 statements or more, and then stops answering
// anything (TestBulkLimitFerretDB).
func (clientTime) bulkLimit() int { return 64 }

func (c clientTime) acquire(key any, holder string, ttl time.Duration) (bson.D, any) {
	now := c.now()
	filter := bson.D{{Key: "_id", Value: key}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "holder", Value: holder}},
		bson.D{{Key: "holder", Value: ""}},
		bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
	}}}
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "holder", Value: holder}, {Key: "expires", Value: now.Add(ttl)}}},
		{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "value", Value: ""}}},
	}
	return filter, update
}

func (c clientTime) renew(ttl time.Duration, value string) any {
	return bson.D{{Key: "$set", Value: bson.D{{Key: "expires", Value: c.now().Add(ttl)}, {Key: "value", Value: value}}}}
}

func (c clientTime) release(value string) any {
	return bson.D{{Key: "$set", Value: bson.D{{Key: "holder", Value: ""}, {Key: "expires", Value: c.now()}, {Key: "value", Value: value}}}}
}

func (c clientTime) read(ctx context.Context, coll *mongo.Collection, key any) (record, bool, bool, error) {
	var rec record
	err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&rec)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return record{}, false, false, nil
	}
	if err != nil {
		return record{}, false, false, err
	}
	c.judge(&rec, c.now())
	return rec, rec.Expired, true, nil
}

func (c clientTime) readMany(ctx context.Context, coll *mongo.Collection, keys []string) (map[string]record, error) {
	cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}})
	if err != nil {
		return nil, err
	}
	now := c.now()
	return decodeKeyed(ctx, cur, func(r *record) { c.judge(r, now) })
}

// judge judges r by this host's clock, as the fallback path's writes do.
func (clientTime) judge(r *record, now time.Time) {
	r.Expired = !r.Expires.After(now)
	r.Left = r.Expires.Sub(now).Milliseconds()
}
