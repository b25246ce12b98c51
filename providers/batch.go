package providers

import (
	"errors"
	"fmt"
	"sync"
)

// The helpers below are what the stores' Batcher implementations share:
// which items of a batch go in it, running the items a batch leaves to the
// single operations, and the error each item gets. What a store sends and
// how it judges the answers stays in its package.

// SingleWorkers bounds the single operations a batch runs at once for the
// items it leaves to them (a record that changed between a read and a
// write, a transaction that lost every race).
const SingleWorkers = 8

// Distinct checks every item i < n with check (a failed check is the item's
// error, given to fail) and splits the others into the first of each key,
// for the batch, and repeats of a key, left to the single operation after
// the batch so that they are judged after the first.
func Distinct(n int, key func(i int) string, check func(i int) error, fail func(i int, err error)) (batch, repeats []int) {
	seen := make(map[string]bool, n)
	for i := range n {
		if err := check(i); err != nil {
			fail(i, err)
			continue
		}
		if k := key(i); seen[k] {
			repeats = append(repeats, i)
		} else {
			seen[k] = true
			batch = append(batch, i)
		}
	}
	return batch, repeats
}

// SplitBatch starts a batch of n items of a store's op ("acquire", "renew"
// or "release"): errs, the answer of each item; fail, which sets an item's
// error worded as the single operation words it (Wrap; for "acquire",
// WrapFailure, so that a *HeldError passes as it is); and the items that
// pass check, split as Distinct splits them.
func SplitBatch(store, op string, n int, key func(i int) string, check func(i int) error) (errs []error, fail func(i int, err error), batch, repeats []int) {
	errs = make([]error, n)
	wrap := Wrap
	if op == "acquire" {
		wrap = WrapFailure
	}
	fail = func(i int, err error) { errs[i] = wrap(store, op, key(i), err) }
	batch, repeats = Distinct(n, key, check, fail)
	return errs, fail, batch, repeats
}

// ForEach calls fn with each of idx, SingleWorkers at a time, and returns
// when every call has.
func ForEach(idx []int, fn func(i int)) {
	ForEachN(len(idx), SingleWorkers, func(n int) { fn(idx[n]) })
}

// Singly hands the items a batch left to the single operation to one: those
// of retry SingleWorkers at a time, then the repeats of a key one by one, in
// order, so that each is judged after the items before it.
func Singly(retry, repeats []int, one func(i int)) {
	ForEach(retry, one)
	for _, i := range repeats {
		one(i)
	}
}

// ForEachN calls fn(0..n-1), at most workers at a time, and returns when
// every call has.
func ForEachN(n, workers int, fn func(k int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for k := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(k)
		})
	}
	wg.Wait()
}

// Chunks calls fn with idx in slices of at most size, in order.
func Chunks(idx []int, size int, fn func(chunk []int)) {
	for start := 0; start < len(idx); start += size {
		fn(idx[start:min(start+size, len(idx))])
	}
}

// FailAll gives err to fail for each of idx: a request that failed as a
// whole is the error of every item it carried.
func FailAll(idx []int, err error, fail func(i int, err error)) {
	for _, i := range idx {
		fail(i, err)
	}
}

// Wrap says what was being done when err happened, as every store words
// it: `sql: renew "job": ...` (store, op, key). nil stays nil.
func Wrap(store, op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s %q: %w", store, op, key, err)
}

// WrapFailure is Wrap for the error of a lease operation, except the
// refusal the operation answers with, returned as it is: a *HeldError
// (ErrHeld) from "acquire", ErrLost from "renew" and "release". Those are
// the answers the caller acts on, and they name the key themselves.
func WrapFailure(store, op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case op == "acquire" && errors.Is(err, ErrHeld),
		(op == "renew" || op == "release") && errors.Is(err, ErrLost):
		return err
	}
	return Wrap(store, op, key, err)
}
