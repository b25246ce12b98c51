package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/providers"
)

// An attempt of RunOnce never outlasts what remains of Wait or of the
// store's allowance by more than minOnceAttempt, whatever the term window
// would give it; a run of failures as long as StoreWait ends the wait with
// ErrStoreUnreachable, and a "held" answer starts the allowance over.
func TestOnceBoundsEachAttempt(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	s := time.Second
	window := 9750 * time.Millisecond
	down := errors.New("dial tcp: connection refused")

	o := &oneShot{Once: Once{Wait: 2 * s, StoreWait: time.Minute}, deadline: t0.Add(2 * s)}
	for _, tc := range []struct {
		at, want time.Duration
	}{{0, 2 * s}, {1500 * time.Millisecond, s}, {2 * s, s}} {
		if got := o.capAttempt(t0.Add(tc.at), window); got != tc.want {
			t.Errorf("-timeout 2s, attempt at +%s: timeout %s, want %s", tc.at, got, tc.want)
		}
	}
	if got := o.capAttempt(t0, 300*time.Millisecond); got != 300*time.Millisecond {
		t.Errorf("a window shorter than the floor: %s, want it kept", got)
	}

	// -timeout 0: one real attempt.
	o = &oneShot{Once: Once{Wait: 0}, deadline: t0}
	if err := o.giveUp(t0); err != nil {
		t.Fatal(err)
	}
	if got := o.capAttempt(t0, window); got != minOnceAttempt {
		t.Errorf("-timeout 0: %s, want %s", got, minOnceAttempt)
	}

	// No -timeout, -store-timeout 5s: failures from +0 end the wait at +5s.
	o = &oneShot{Once: Once{Wait: -1, StoreWait: 5 * s}}
	if got := o.capAttempt(t0, window); got != 5*s {
		t.Errorf("first attempt: %s, want the store's 5s", got)
	}
	for _, at := range []time.Duration{0, 2 * s, 4 * s} {
		if err := o.giveUp(t0.Add(at)); err != nil {
			t.Fatalf("attempt at +%s: %v", at, err)
		}
		o.answered(nil, down)
	}
	if got := o.capAttempt(t0.Add(4*s), window); got != s {
		t.Errorf("attempt at +4s: %s, want what remains (1s)", got)
	}
	if got := o.capWait(t0.Add(4*s), 2*s); got != s {
		t.Errorf("pause at +4s: %s, want 1s, to the end of the allowance", got)
	}
	err := o.giveUp(t0.Add(5 * s))
	if !errors.Is(err, ErrStoreUnreachable) || !errors.Is(err, down) || !strings.Contains(err.Error(), "no answer for 5s") {
		t.Fatalf("at +5s: %v, want ErrStoreUnreachable after 5s wrapping the store's error", err)
	}

	// A "held" answer is an answer: the allowance starts over.
	o = &oneShot{Once: Once{Wait: -1, StoreWait: 5 * s}}
	o.giveUp(t0)
	o.answered(nil, down)
	o.giveUp(t0.Add(3 * s))
	held := &providers.HeldError{Holder: "other#1", Token: 4}
	o.answered(held, held)
	o.giveUp(t0.Add(4 * s))
	o.answered(nil, down)
	if err := o.giveUp(t0.Add(8 * s)); err != nil {
		t.Errorf("4s after the last answer: %v, want the wait to go on", err)
	}
	if err := o.giveUp(t0.Add(9 * s)); !errors.Is(err, ErrStoreUnreachable) {
		t.Errorf("5s after the failures began again: %v, want ErrStoreUnreachable", err)
	}
}
