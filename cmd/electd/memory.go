package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
)

// loadGCPercent is the garbage collector's target while a configuration is
// read. hcl lexes a whole file into one token slice that it grows as it
// goes, so reading allocates many times what it keeps: about 350 MB for
// 10,000 jobs, of which the Config keeps 5 MB. At the default GOGC (100)
// the heap peaks near twice what is live; at 25 it peaks near 1.25 times:
// measured on 10,000 jobs, the peak RSS of reading alone fell from 143 to
// 111 MB for 0.25 s more CPU, paid at start and at each reload
// (the bench's scale suite). A small configuration costs the same either way.
const loadGCPercent = 25

// loadLean is config.Load with the garbage collector's target lowered to
// loadGCPercent while it runs, unless GOGC already asks for less (or turns
// the collector off).
func loadLean(paths []string, opts config.Options) (*config.Config, *config.Diagnostics) {
	prev := debug.SetGCPercent(loadGCPercent)
	if prev < loadGCPercent { // GOGC lower, or off (-1)
		debug.SetGCPercent(prev)
	}
	cfg, diags := config.Load(paths, opts)
	debug.SetGCPercent(prev)
	// What parsing left behind goes back to the system now, before the
	// agent's first requests allocate on top of it.
	debug.FreeOSMemory()
	return cfg, diags
}

// The agent's soft memory limit (runtime/debug.SetMemoryLimit).
//
// An agent with thousands of jobs renews them together, once per
// renew_every, and the garbage of that burst lands on a heap whose target
// (GOGC=100: twice what was live at the last collection) was set while the
// previous burst was still live: RSS swings by tens of megabytes every few
// seconds. A soft limit just above what the agent needs keeps the peaks
// down. It is twice the live heap plus memorySlack, so that it never asks
// the collector for more work than GOGC would once the heap is large, and
// at least memoryFloor, so that it never binds on a small agent. Measured
// with 10,000 jobs on SQLite: peak RSS 133 → 105 MiB, RSS while holding
// 106 → 100 MiB, CPU unchanged within noise (the bench's scale suite).
const (
	memoryFloor = 64 << 20
	memorySlack = 16 << 20 // stacks, GC metadata, what is not heap
	memoryEvery = 30 * time.Second
)

// limitMemory keeps the soft memory limit up to date with the live heap
// until ctx ends. It does nothing when GOMEMLIMIT is set or GOGC is off:
// the operator decided.
func limitMemory(ctx context.Context, log hclog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" || strings.EqualFold(os.Getenv("GOGC"), "off") {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var last int64
	for {
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			if limit := memoryLimit(live[0].Value.Uint64()); limit != last {
				debug.SetMemoryLimit(limit)
				log.Debug("soft memory limit", "live_heap_mib", live[0].Value.Uint64()>>20, "limit_mib", limit>>20)
				last = limit
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(memoryEvery):
		}
	}
}

// memoryLimit is the soft limit for a live heap of live bytes.
func memoryLimit(live uint64) int64 {
	return max(memoryFloor, 2*int64(min(live, 1<<60))+memorySlack)
}
