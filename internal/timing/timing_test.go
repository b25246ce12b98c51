package timing

import (
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, tc := range []struct {
		name             string
		ttl, renew, stop time.Duration
		renewals         int
		want             *Problem
	}{
		{name: "the defaults keep the rule", ttl: 15 * s, renew: 5 * s, stop: 0, renewals: 2},
		{name: "just inside: 2×4s + 1.799s + 0.1s < 9.9s", ttl: 10 * s, renew: 4 * s, stop: 1799 * ms, renewals: 2},
		{name: "at the budget is outside: 2×4s + 1.8s + 0.1s = 9.9s", ttl: 10 * s, renew: 4 * s, stop: 1800 * ms, renewals: 2,
			want: &Problem{Need: 9900 * ms, Budget: 9900 * ms, MinTTL: 11 * s, MaxRenew: 3900 * ms}},
		{name: "renew_every not shorter than the ttl", ttl: 5 * s, renew: 5 * s, renewals: 2, want: &Problem{RenewNotShorter: true}},
		{name: "stop too long: the fixes named", ttl: 10 * s, renew: 3 * s, stop: 5 * s, renewals: 2,
			want: &Problem{Need: 11100 * ms, Budget: 9900 * ms, MinTTL: 12 * s, MaxRenew: 2300 * ms}},
		{name: "no renew_every helps", ttl: 5 * s, renew: 1 * s, stop: 5 * s, renewals: 2,
			want: &Problem{Need: 7100 * ms, Budget: 4950 * ms, MinTTL: 8 * s}},
		{name: "three renewals ask for more", ttl: 10 * s, renew: 3 * s, stop: 0, renewals: 3},
		{name: "three renewals refused where two fit", ttl: 10 * s, renew: 3300 * ms, stop: 0, renewals: 3,
			want: &Problem{Need: 10 * s, Budget: 9900 * ms, MinTTL: 11 * s, MaxRenew: 3200 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.ttl, tc.renew, tc.stop, tc.renewals)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("Check = %+v, want nil", got)
			case tc.want != nil && got == nil:
				t.Fatalf("Check = nil, want %+v", tc.want)
			case tc.want != nil && *got != *tc.want:
				t.Fatalf("Check = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStopBy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	if got := ValidUntil(t0, 10*time.Second).Sub(t0); got != 9900*time.Millisecond {
		t.Errorf("ValidUntil = t0+%s, want t0+9.9s", got)
	}
	if got := StopBy(t0, 10*time.Second, 2*time.Second).Sub(t0); got != 7800*time.Millisecond {
		t.Errorf("StopBy = t0+%s, want t0+7.8s (9.9s - 2s - 0.1s)", got)
	}
}
