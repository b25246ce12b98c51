package datastore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/datastore"
)

// Two nodes share one Datastore namespace: the first takes the lease, the
// second is told who holds it, and takes over with the next fencing token
// once the first releases. (The tests of this package point
// DATASTORE_EMULATOR_HOST at an emulator; in production the client uses the
// application default credentials.)
func Example() {
	settings := datastore.Settings{ProjectID: "my-project", Namespace: fmt.Sprintf("example-%d", time.Now().UnixNano())}
	ctx := context.Background()

	web1, err := datastore.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		panic(err)
	}
	defer web1.Close()
	web2, err := datastore.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		panic(err)
	}
	defer web2.Close()

	lease, err := web1.Acquire(ctx, providers.AcquireRequest{Key: "catalog-sync", Holder: "web-1", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-1 leads with token", lease.Token)

	var held *providers.HeldError
	if _, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "catalog-sync", Holder: "web-2", TTL: 15 * time.Second}); errors.As(err, &held) {
		fmt.Println("web-2 waits: held by", held.Holder)
	}

	lease.Value = "slot 2026-11-22T02:00"
	if err := web1.Release(ctx, lease); err != nil {
		panic(err)
	}
	next, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "catalog-sync", Holder: "web-2", TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-2 leads with token", next.Token, "after", next.Value)
	// Output:
	// web-1 leads with token 1
	// web-2 waits: held by web-1
	// web-2 leads with token 2 after slot 2026-11-22T02:00
}
