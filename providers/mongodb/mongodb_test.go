package mongodb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/providertest"
)

// realMongoEnv names a real MongoDB (4.2 or later, a replica set for
// majority writes to mean anything) for the cases FerretDB cannot run.
const realMongoEnv = "ELECTD_TEST_MONGODB_URI"

// unreachableURI points at a closed port; the short server selection
// timeout makes each failing call return in about a second.
const unreachableURI = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1000&connectTimeoutMS=1000"

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func open(t *testing.T, s mongodb.Settings) providers.Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := s.Open(ctx, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p
}

func openClientClock(t *testing.T, s mongodb.Settings) providers.Provider {
	t.Helper()
	p, err := mongodb.NewClientClock(s, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("NewClientClock: %v", err)
	}
	return p
}

// store is a reachable server; each factory call gets a fresh collection
// in it, dropped when the case ends.
type store struct {
	uri   string
	admin *mongo.Client
}

func reach(t testing.TB, uri string) *store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mongo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("MongoDB not reachable: %v", err)
	}
	return &store{uri: uri, admin: c}
}

func (s *store) settings(t *testing.T) mongodb.Settings {
	settings := mongodb.Settings{URI: s.uri, Database: "electd_test", Collection: randomName("leases_"), WriteConcern: "majority"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.admin.Database(settings.Database).Collection(settings.Collection).Drop(ctx); err != nil {
			t.Errorf("drop %s: %v", settings.Collection, err)
		}
	})
	return settings
}

// factory opens clients the way the agent does (probe included); or with
// the fallback forced when clientClock is true.
func (s *store) factory(clientClock bool) providertest.Factory {
	return func(t *testing.T) func(*testing.T) providers.Provider {
		settings := s.settings(t)
		return func(t *testing.T) providers.Provider {
			if clientClock {
				return openClientClock(t, settings)
			}
			return open(t, settings)
		}
	}
}

func unreachable(t *testing.T) providers.Provider {
	return open(t, mongodb.Settings{URI: unreachableURI, Database: "electd", Collection: "leases"})
}

// TestFerretDB runs the whole conformance suite, racing clients included,
// against FerretDB v1.24 (the fallback path: no pipelines, the agent's
// clock). FerretDB does not arbitrate racing updates of one document
// (TestFerretDBRacingAcquire); the provider never asks it to, since every
// write is an insert of a new _id. The race alone, 100 times in a row:
//
//	go test -count=100 -run 'TestFerretDB$/^ConcurrentAcquire' ./providers/mongodb/
func TestFerretDB(t *testing.T) {
	t.Parallel()
	uri, _ := teststore.StartFerretDB(t)
	s := reach(t, uri)
	providertest.Run(t, s.factory(false), providertest.Options{Unreachable: unreachable, BatchSize: batchSize})
}

// batchSize spans several bulk requests on the fallback path (64 writes).
const batchSize = 300

// TestMongoDB runs the whole conformance suite, racing clients included,
// and the whole suite again on the fallback path, against a real MongoDB.
func TestMongoDB(t *testing.T) {
	uri := os.Getenv(realMongoEnv)
	if uri == "" {
		t.Skip(realMongoEnv + " is not set: the $$NOW pipeline path needs a real MongoDB 4.2+; FerretDB, which TestFerretDB uses, has no pipeline updates")
	}
	t.Parallel()
	s := reach(t, uri)
	t.Run("ServerClockDetected", func(t *testing.T) {
		p := open(t, s.settings(t)).(*mongodb.Provider)
		defer p.Close()
		server, err := p.ServerClock(context.Background())
		if err != nil || !server {
			t.Fatalf("ServerClock = %v, %v: want the $$NOW path on MongoDB 4.2+", server, err)
		}
	})
	t.Run("Conformance", func(t *testing.T) {
		providertest.Run(t, s.factory(false), providertest.Options{Unreachable: unreachable, BatchSize: batchSize})
	})
	t.Run("ClientClockConformance", func(t *testing.T) {
		providertest.Run(t, s.factory(true), providertest.Options{Unreachable: unreachable, BatchSize: batchSize})
	})
}
