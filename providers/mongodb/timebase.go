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
	// Expired is computed by the server's clock in serverTime.read only.
	Expired bool `bson:"expired,omitempty"`
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
	// serverClock reports whether expiries are judged by the server's clock.
	serverClock() bool
}

// serverTime needs update pipelines and $$NOW (MongoDB 4.2+). Strings from
// the caller go through $literal: in a pipeline a string starting with "$"
// would otherwise be read as a field path.
type serverTime struct{}

func (serverTime) serverClock() bool { return true }

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
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: key}}}},
		{{Key: "$addFields", Value: bson.D{{Key: "expired", Value: bson.D{{Key: "$lte", Value: bson.A{"$expires", "$$NOW"}}}}}}},
	})
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

// plusNow is $$NOW + ttl; BSON dates have millisecond precision.
func plusNow(ttl time.Duration) bson.D {
	return bson.D{{Key: "$add", Value: bson.A{"$$NOW", ttl.Milliseconds()}}}
}

// clientTime uses plain update operators and the agent's clock. The write
// is still one atomic findAndModify on MongoDB; only "now" comes from here.
type clientTime struct{ now func() time.Time }

func (clientTime) serverClock() bool { return false }

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
	return rec, !rec.Expires.After(c.now()), true, nil
}
