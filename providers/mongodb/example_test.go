package mongodb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/mongodb"
)

// Two nodes share one collection: the first takes the lease, the second is
// told who holds it and takes over with the next fencing token once the
// first releases. (Not run by go test: it needs a MongoDB at $MONGO_URI.)
func Example() {
	settings := mongodb.Settings{URI: os.Getenv("MONGO_URI"), Database: "electd", Collection: "leases", WriteConcern: "majority"}
	ctx := context.Background()
	log := hclog.Default()

	web1, err := mongodb.New(ctx, settings, log)
	if err != nil {
		panic(err)
	}
	defer web1.Close()
	web2, err := mongodb.New(ctx, settings, log)
	if err != nil {
		panic(err)
	}
	defer web2.Close()

	lease, err := web1.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-1", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-1 leads with token", lease.Token)

	var held *providers.HeldError
	if _, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-2", TTL: 15 * time.Second}); errors.As(err, &held) {
		fmt.Println("web-2 waits: held by", held.Holder)
	}

	lease.Value = "slot 2026-11-22T02:30"
	if err := web1.Release(ctx, lease); err != nil {
		panic(err)
	}
	next, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-2", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-2 leads with token", next.Token, "after", next.Value)
}
