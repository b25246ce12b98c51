package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	redisprovider "github.com/electd/electd/providers/redis"
)

// Two nodes share one Redis server: the first takes the lease, the second is
// refused, subscribes with Notify, and takes over with the next fencing
// token as soon as the first releases. (Not run by go test: it needs a
// server on 6379.)
func Example() {
	ctx := context.Background()
	settings := redisprovider.Settings{Addresses: []string{"127.0.0.1:6379"}, Prefix: "electd:"}
	web1, err := redisprovider.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		log.Fatal(err)
	}
	defer web1.Close()
	web2, err := redisprovider.New(ctx, settings, hclog.NewNullLogger())
	if err != nil {
		log.Fatal(err)
	}
	defer web2.Close()

	lease, err := web1.Acquire(ctx, providers.AcquireRequest{Key: "queue-consumer", Holder: "web-1", TTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("web-1 leads with token", lease.Token)

	var held *providers.HeldError
	if _, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "queue-consumer", Holder: "web-2", TTL: 15 * time.Second}); errors.As(err, &held) {
		fmt.Println("web-2 waits: held by", held.Holder)
	}
	wake := make(chan struct{}, 1)
	if err := web2.Notify(ctx, func(key string) {
		if key == "queue-consumer" || key == "" { // "": any key may have changed
			select {
			case wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}); err != nil {
		log.Fatal(err) // the server is down: poll instead
	}

	lease.Value = "offset 4711"
	if err := web1.Release(ctx, lease); err != nil {
		log.Fatal(err)
	}
	<-wake
	next, err := web2.Acquire(ctx, providers.AcquireRequest{Key: "queue-consumer", Holder: "web-2", TTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("web-2 leads with token", next.Token, "after", next.Value)
}
