package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
	etcdprovider "github.com/electd/electd/providers/etcd"
)

// A candidate takes the lease, or waits on Notify until the holder lets it
// go. (Compiled, not run: it needs an etcd at 127.0.0.1:2379; the tests
// start their own.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := etcdprovider.New(ctx, etcdprovider.Settings{
		Endpoints:   []string{"127.0.0.1:2379"},
		Prefix:      "/electd/",
		DialTimeout: 5 * time.Second,
	}, hclog.NewNullLogger())
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// Subscribe first, then try: a release between the two still wakes us.
	changed := make(chan struct{}, 1)
	if err := p.Notify(ctx, func(key string) {
		if key == "scheduler" || key == "" { // "": any key may have changed
			select {
			case changed <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}); err != nil {
		panic(err)
	}
	for {
		lease, err := p.Acquire(ctx, providers.AcquireRequest{Key: "scheduler", Holder: "node-1", TTL: 15 * time.Second})
		var held *providers.HeldError
		switch {
		case err == nil:
			fmt.Println("leading with fencing token", lease.Token)
			return
		case errors.As(err, &held):
			fmt.Println("held by", held.Holder, "until about", held.Expires.Format(time.RFC3339))
		default:
			fmt.Println("etcd:", err)
		}
		select {
		case <-changed:
		case <-time.After(2 * time.Second): // retry_every: hints are hints
		case <-ctx.Done():
			return
		}
	}
}
