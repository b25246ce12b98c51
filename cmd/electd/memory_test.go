package main

import (
	"context"
	"math"
	"runtime/debug"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		live uint64
		want int64
	}{
		{"small agent: the floor", 4 << 20, memoryFloor},
		{"at the floor", 24 << 20, memoryFloor},
		{"large heap: twice it, and the slack", 100 << 20, 216 << 20},
		{"absurd", math.MaxUint64, 2<<60 + memorySlack},
	} {
		if got := memoryLimit(tc.live); got != tc.want {
			t.Errorf("%s: memoryLimit(%d) = %d, want %d", tc.name, tc.live, got, tc.want)
		}
	}
}

// The agent sets a soft memory limit unless the operator chose one
// (GOMEMLIMIT) or turned the collector off (GOGC=off).
func TestLimitMemoryRespectsOperator(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, env := range [][2]string{{"GOMEMLIMIT", "1GiB"}, {"GOGC", "off"}} {
		t.Run(env[0], func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv(env[0], env[1])
			limitMemory(cancelled, hclog.NewNullLogger())
			if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
				t.Errorf("with %s=%s the limit became %d", env[0], env[1], got)
			}
		})
	}
	t.Run("unset", func(t *testing.T) {
		debug.SetMemoryLimit(math.MaxInt64)
		t.Setenv("GOMEMLIMIT", "")
		t.Setenv("GOGC", "")
		limitMemory(cancelled, hclog.NewNullLogger())
		if got := debug.SetMemoryLimit(-1); got < memoryFloor || got == math.MaxInt64 {
			t.Errorf("limit %d, want at least %d", got, memoryFloor)
		}
	})
}
