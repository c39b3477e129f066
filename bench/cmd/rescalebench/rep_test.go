package main

import (
	"testing"
	"time"
)

func TestMinRate(t *testing.T) {
	var t0 = time.Unix(1000, 0)
	var at = func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Samples every 100ms, 1,000 events a second, but none from 1.0s to
	// 1.5s (500 events a second over the second from 0.5s).
	var s = &sampler{}
	var events int64
	for ms := 0; ms <= 3000; ms += 100 {
		s.samples = append(s.samples, sample{t: at(ms), pid: 1, events: events})
		if ms < 1000 || ms >= 1500 {
			events += 100
		}
	}
	var f = func(x sample) float64 { return float64(x.events) }
	for _, tc := range []struct {
		name string
		t, u time.Time
		want float64
	}{
		{"spans of a second", at(0), at(3000), 500},
		{"no stall", at(1500), at(3000), 1000},
		// Shorter than a second: the rate over it, from the samples around.
		{"a short split", at(50), at(1020), float64(1000) / 1.1},
		{"a short stall", at(1000), at(1500), 0},
	} {
		if got := s.minRate(tc.t, tc.u, time.Second, f); got != tc.want {
			t.Errorf("%s: minRate = %.2f, want %.2f", tc.name, got, tc.want)
		}
	}
}
