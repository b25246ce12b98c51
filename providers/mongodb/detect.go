package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/writeconcern"
)

// probeID is the _id of the scratch document of the capability probe. It is
// a document, and lease keys are strings, so it never names a lease.
var probeID = bson.D{{Key: "electd", Value: "capability-probe"}}

// Server error codes meaning "this server cannot run that update": no
// update pipelines or $$NOW (MongoDB before 4.2 answers BadValue,
// FailedToParse or TypeMismatch; FerretDB v1 answers NotImplemented).
var noPipelineCodes = []int{2, 9, 14, 238, 17276, 40324}

// timeBase returns how this provider judges time, probing the server the
// first time it answers.
func (p *Provider) timeBase(ctx context.Context) (timeBase, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	if p.tb != nil {
		return p.tb, nil
	}
	tb, err := p.detect(ctx)
	if err != nil {
		return nil, fmt.Errorf("probe server capabilities: %w", err)
	}
	p.tb = tb
	return tb, nil
}

// detect writes the server-clock path's insert on the scratch document: if
// the server takes it, it takes every operation of that path.
func (p *Provider) detect(ctx context.Context) (timeBase, error) {
	client := clientTime{now: time.Now}
	if p.forceClient {
		p.ensureIndex(ctx)
		return client, nil
	}
	filter, update := serverTime{}.insertParts(probeID, entry{ttl: time.Millisecond})
	var rec record
	err := p.coll.FindOneAndUpdate(ctx, filter, update, probeUpsert).Decode(&rec)
	if mongo.IsDuplicateKeyError(err) {
		// Another agent's probe document, not yet deleted: that
		// agent's server took the pipeline, and it is this server.
		err, rec.Expires = nil, time.Unix(1, 0)
	}
	if err == nil && !rec.Expires.IsZero() {
		if _, err := p.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: probeID}}); err != nil {
			p.log.Debug("could not delete the probe document", "error", err)
		}
		p.log.Debug("server judges lease expiry ($$NOW in update pipelines)")
		p.ensureIndex(ctx)
		return serverTime{}, nil
	}
	var ce mongo.CommandError
	if err != nil && !(errors.As(err, &ce) && slices.Contains(noPipelineCodes, int(ce.Code))) {
		return nil, err // unreachable, unauthorised, ...: no verdict yet
	}
	if err == nil {
		err = errors.New("the pipeline update left no expiry")
	}
	args := []any{"reason", err}
	if skew, ok := p.clockSkew(ctx); ok {
		args = append(args, "server_clock_minus_local", skew)
	}
	p.ensureIndex(ctx)
	p.log.Warn("server has no update pipelines with $$NOW (MongoDB < 4.2 or FerretDB): lease expiry is judged by each agent's clock, keep agent clocks in sync", args...)
	return client, nil
}

var probeUpsert = options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)

// ensureIndex creates the index on key and slot that finds a key's newest
// entry without a scan. Safety does not rest on it (only the _id index
// does), so a refusal (a user without createIndex) is a warning.
func (p *Provider) ensureIndex(ctx context.Context) {
	_, err := p.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "key", Value: 1}, {Key: "slot", Value: -1}},
		Options: options.Index().SetName("electd_key_slot"),
	})
	if err != nil {
		p.log.Warn("could not create the index on key and slot: each read scans the collection", "error", err)
	}
}

// clockSkew estimates the server's clock minus this host's from the
// localTime of a hello, for the fallback's warning.
func (p *Provider) clockSkew(ctx context.Context) (time.Duration, bool) {
	var hello struct {
		LocalTime time.Time `bson:"localTime"`
	}
	start := time.Now()
	err := p.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
	rtt := time.Since(start)
	if err != nil || hello.LocalTime.IsZero() {
		return 0, false
	}
	return hello.LocalTime.Sub(start.Add(rtt / 2)).Round(time.Millisecond), true
}

// writeConcern parses the write_concern setting: "majority" (default), a
// number of members, or the name of a custom write concern (tag set).
func writeConcern(s string) (*writeconcern.WriteConcern, error) {
	if s == "" || s == "majority" {
		return writeconcern.Majority(), nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return nil, fmt.Errorf("mongodb: write_concern %q: unacknowledged writes cannot arbitrate a lease; use \"majority\" or at least 1", s)
		}
		return &writeconcern.WriteConcern{W: n}, nil
	}
	return writeconcern.Custom(s), nil
}

// redact keeps the URI and its password out of an error text: the URI is a
// secret setting.
func redact(err error, uri string) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, uri, "<uri>")
	if u, perr := url.Parse(uri); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "<password>")
		}
	}
	return msg
}
