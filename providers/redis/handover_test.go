package redis_test

import (
	"testing"
	"time"

	"github.com/electd/electd/providers/providertest"
	"github.com/electd/electd/providers/redis"
)

// TestHandover measures a graceful handover: the candidate, refused before
// and waiting on Notify (pub/sub), is notified and acquires.
//
//	go test -count=1 -run TestHandover -v ./providers/redis/
func TestHandover(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "single", 3: "redlock"}[n], func(t *testing.T) {
			t.Parallel()
			addrs, _ := servers(t, n)
			s := redis.Settings{Addresses: addrs, Prefix: randomPrefix()}
			a, b := client(t, s), client(t, s)
			providertest.Handover(t, a, b, providertest.HandoverOptions{Target: 100 * time.Millisecond, TokensMaySkip: n > 1})
		})
	}
}
