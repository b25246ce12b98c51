package azureblob_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
)

// Two nodes share one container: the first takes the lease, the second is
// told who holds it, and takes over with the next fencing token once the
// first releases. (The tests point AZURE_STORAGE_CONNECTION_STRING at
// Azurite.)
func Example() {
	settings := azureblob.Settings{
		ConnectionString: os.Getenv("AZURE_STORAGE_CONNECTION_STRING"),
		Container:        "electd-example",
	}
	ctx := context.Background()
	web1, err := azureblob.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		panic(err)
	}
	defer web1.Close()
	web2, err := azureblob.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		panic(err)
	}
	defer web2.Close()

	lease, err := web1.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-1", TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-1 leads with token", lease.Token)

	var held *providers.HeldError
	if _, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-2", TTL: 30 * time.Second}); errors.As(err, &held) {
		fmt.Println("web-2 waits: held by", held.Holder)
	}

	lease.Value = "slot 2026-11-22T02:30"
	if err := web1.Release(ctx, lease); err != nil {
		panic(err)
	}
	next, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "billing-sync", Holder: "web-2", TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("web-2 leads with token", next.Token, "after", next.Value)
	// Output:
	// web-1 leads with token 1
	// web-2 waits: held by web-1
	// web-2 leads with token 2 after slot 2026-11-22T02:30
}
