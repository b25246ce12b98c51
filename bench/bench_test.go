package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) sample {
		s := sample{}
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	thirty := sample{}
	for i := 30; i >= 1; i-- { // unsorted on purpose
		thirty = append(thirty, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		s    sample
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"median of four is the second", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p50 of 30", thirty, 50, 15 * time.Millisecond},
		// Nearest rank: with 30 values p99 is the largest, as the report says.
		{"p99 of 30 is the max", thirty, 99, 30 * time.Millisecond},
		{"p90 of 30", thirty, 90, 27 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.pct(tc.p); got != tc.want {
				t.Errorf("pct(%v) = %s, want %s", tc.p, got, tc.want)
			}
		})
	}
}

func TestCell(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"sub-10ms keeps a decimal", 1500 * time.Microsecond, "1.5 ms"},
		{"milliseconds", 2208 * time.Millisecond, "2208 ms"},
		{"seconds above 10 s", 15030 * time.Millisecond, "15.03 s"},
		{"negative", -14900 * time.Microsecond, "−14 ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cell(tc.d); got != tc.want {
				t.Errorf("cell(%s) = %q, want %q", tc.d, got, tc.want)
			}
		})
	}
}

func TestSumMetric(t *testing.T) {
	m := metrics{
		`electd_lease_op_seconds_count{op="renew",provider="etcd.e"} 120`,
		`electd_lease_op_seconds_count{op="acquire",provider="etcd.e"} 3`,
		`electd_lease_op_seconds_count_extra{op="renew"} 999`,
		`grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_type="bidi_stream"} 40`,
		`grpc_server_msg_received_total{grpc_method="Txn",grpc_type="unary"} 2.5e+01`,
		`etcd_debugging_lease_renewed_total 7`,
	}
	tests := []struct {
		name string
		sel  []string
		want float64
	}{
		{"one op", []string{`op="renew"`}, 120},
		{"all ops, not a longer name", nil, 123},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sumMetric(m, "electd_lease_op_seconds_count", tc.sel...); got != tc.want {
				t.Errorf("sum = %v, want %v", got, tc.want)
			}
		})
	}
	if got := sumMetric(m, "grpc_server_msg_received_total"); got != 65 {
		t.Errorf("grpc messages = %v, want 65 (exponent notation parsed)", got)
	}
	if got := sumMetric(m, "etcd_debugging_lease_renewed_total"); got != 7 {
		t.Errorf("unlabelled counter = %v, want 7", got)
	}
	if got := opLabels(m); len(got) != 2 || got[0] != "acquire" || got[1] != "renew" {
		t.Errorf("opLabels = %v, want [acquire renew]", got)
	}
}

// The CPU reader must see CPU this process spends.
func TestProcCPUGrows(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel's own account (getrusage) shows 100 ms of
	// CPU, however loaded the machine: procCPU must have seen the same.
	start := rusageCPU(t)
	x := 0
	for deadline := time.Now().Add(20 * time.Second); rusageCPU(t)-start < 0.1; x++ {
		if time.Now().After(deadline) {
			t.Fatal("100 ms of CPU not had in 20 s of spinning")
		}
	}
	spent := rusageCPU(t) - start
	after, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in clock ticks (10 ms), getrusage more finely.
	if got := after - before; got < spent-0.03 || got > spent+1 {
		t.Errorf("procCPU grew by %.3f s while getrusage counted %.3f s (%d loops)", got, spent, x)
	}
	if rss, _ := procMem(os.Getpid()); rss < 1<<20 {
		t.Errorf("RSS = %d bytes, want at least 1 MiB", rss)
	}
}

// rusageCPU is this process's user and system CPU time, in seconds.
func rusageCPU(t *testing.T) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// The window's memory readings split RSS into the process's own memory and
// the mapped files (the binary), which add up to it.
func TestMemSamples(t *testing.T) {
	var m memSamples
	for range 3 {
		m.add(os.Getpid())
	}
	rss, anon, file, rssMax := m.mean()
	if anon < 1<<20 || file < 1<<20 {
		t.Errorf("anon %d, file %d bytes: want at least 1 MiB of each (heap, binary)", anon, file)
	}
	if anon+file > rss || rss-(anon+file) > 16<<20 || rssMax < rss {
		t.Errorf("RSS %d (max %d) is not anon %d + file %d (+ shared memory)", rss, rssMax, anon, file)
	}
	var none memSamples
	none.add(1 << 30) // no such process
	if rss, _, _, _ := none.mean(); rss != 0 {
		t.Errorf("no process: RSS %d, want 0", rss)
	}
}
