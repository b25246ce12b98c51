package providers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSplitBatch: invalid items get their error, worded as the single
// operation words it; the first of each key goes in the batch and the
// repeats after it.
func TestSplitBatch(t *testing.T) {
	keys := []string{"a", "", "b", "a", "c", "b"}
	held := &HeldError{Key: "c", Holder: "x"}
	errs, fail, batch, repeats := SplitBatch("mem", "acquire", len(keys), func(i int) string { return keys[i] }, func(i int) error {
		if keys[i] == "" {
			return errors.New("key must not be empty")
		}
		return nil
	})
	if !slices.Equal(batch, []int{0, 2, 4}) || !slices.Equal(repeats, []int{3, 5}) {
		t.Fatalf("batch %v, repeats %v", batch, repeats)
	}
	if errs[1] == nil || errs[1].Error() != `mem: acquire "": key must not be empty` {
		t.Fatalf("invalid item: %v", errs[1])
	}
	fail(4, held)
	if errs[4] != error(held) {
		t.Fatalf("a refused acquire: %v, want the *HeldError as it is", errs[4])
	}
	errs, fail, _, _ = SplitBatch("mem", "renew", 1, func(int) string { return "a" }, func(int) error { return nil })
	fail(0, ErrLost)
	if !errors.Is(errs[0], ErrLost) || errs[0].Error() != `mem: renew "a": providers: lease lost` {
		t.Fatalf("a lost renewal in a batch: %v", errs[0])
	}
}

func TestWrapFailure(t *testing.T) {
	held := &HeldError{Key: "k", Holder: "x"}
	for _, c := range []struct {
		op   string
		err  error
		want string
	}{
		{"acquire", nil, ""},
		{"acquire", held, held.Error()},
		{"acquire", errors.New("down"), `s: acquire "k": down`},
		{"renew", fmt.Errorf("s: renew: %w", ErrLost), "s: renew: providers: lease lost"},
		{"release", ErrLost, ErrLost.Error()},
		{"renew", held, `s: renew "k": ` + held.Error()},
		{"observe", ErrLost, `s: observe "k": providers: lease lost`},
	} {
		got := WrapFailure("s", c.op, "k", c.err)
		if (got == nil) != (c.want == "") || got != nil && got.Error() != c.want {
			t.Errorf("WrapFailure(%s, %v) = %v, want %q", c.op, c.err, got, c.want)
		}
		if got != nil && !errors.Is(got, c.err) {
			t.Errorf("WrapFailure(%s, %v) does not wrap it", c.op, c.err)
		}
	}
}

func TestChunksAndForEachN(t *testing.T) {
	var got [][]int
	Chunks([]int{1, 2, 3, 4, 5}, 2, func(c []int) { got = append(got, slices.Clone(c)) })
	if fmt.Sprint(got) != "[[1 2] [3 4] [5]]" {
		t.Fatalf("Chunks: %v", got)
	}
	var running, most, calls atomic.Int64
	ForEachN(40, 3, func(int) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		calls.Add(1)
	})
	if calls.Load() != 40 || most.Load() > 3 {
		t.Fatalf("ForEachN(40, 3): %d calls, %d at once", calls.Load(), most.Load())
	}
}

// TestSingly: every item left to the single operation is run once, the
// repeats of a key after all the others and in their order.
func TestSingly(t *testing.T) {
	var mu sync.Mutex
	var got []int
	Singly([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{12, 10, 11}, func(i int) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, i)
	})
	if len(got) != 13 || !slices.Equal(got[10:], []int{12, 10, 11}) {
		t.Fatalf("order of the calls: %v, want 0 to 9 in any order, then 12, 10, 11", got)
	}
	first := slices.Clone(got[:10])
	slices.Sort(first)
	if !slices.Equal(first, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("retried items called: %v", got[:10])
	}
}

// TestLimits: every lease check goes through the limits, the store's own
// rules on key and holder included.
func TestLimits(t *testing.T) {
	l := Limits{MaxKey: 5, MaxHolder: 3, MinTTL: time.Second,
		Key: func(k string) error {
			if strings.Contains(k, "/") {
				return errors.New(`key must not contain "/"`)
			}
			return nil
		}}
	ok := Lease{Key: "job", Holder: "n1", TTL: time.Second}
	for _, c := range []struct {
		name  string
		check func(Lease) error
		lease func(Lease) Lease
		want  string
	}{
		{"valid", l.CheckRenew, func(x Lease) Lease { return x }, ""},
		{"key too long", l.CheckHeld, func(x Lease) Lease { x.Key = "toolong"; return x }, "key must be 1 to 5 bytes"},
		{"store's key rule", l.CheckRenew, func(x Lease) Lease { x.Key = "a/b"; return x }, `key must not contain "/"`},
		{"empty holder", l.CheckHeld, func(x Lease) Lease { x.Holder = ""; return x }, "holder must be 1 to 3 bytes"},
		{"short ttl renewed", l.CheckRenew, func(x Lease) Lease { x.TTL = time.Millisecond; return x }, "ttl 1ms is shorter than 1s"},
		{"short ttl released", l.CheckHeld, func(x Lease) Lease { x.TTL = 0; return x }, ""},
		{"long value", l.CheckHeld, func(x Lease) Lease { x.Value = strings.Repeat("v", MaxValueLen+1); return x }, "providers: lease value is 257 bytes, more than 256"},
	} {
		err := c.check(c.lease(ok))
		if (err == nil) != (c.want == "") || err != nil && err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := l.Check("a/b", "n1", time.Second); err == nil {
		t.Error("Check let a key through that the store's rule refuses")
	}
}
