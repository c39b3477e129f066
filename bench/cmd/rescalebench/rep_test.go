package main

import (
	"math"
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

// TestDropHalfway checks the progress a drop told halfway through its time:
// interpolated between its reports, from 0 at its beginning to 1 at its end.
func TestDropHalfway(t *testing.T) {
	var t0 = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	var at = func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		reports []progressAt
		want    float64
		ok      bool
	}{
		{nil, 0, false},
		{[]progressAt{{at(1), 0.25}, {at(3), 0.75}}, 0.5, true},
		{[]progressAt{{at(1), 0.1}, {at(3), 0.3}}, 0.2, true},
		{[]progressAt{{at(2), 0.6}}, 0.6, true},
		{[]progressAt{{at(0.5), 0.4}}, 0.4 + 0.6*1.5/3.5, true},
		{[]progressAt{{at(3), 0.9}}, 0.6, true},
	} {
		var s = &shardLog{dropBegan: at(0), dropped: at(4), through: tc.reports}
		if got, ok := s.dropHalfway(); ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("reports %v: halfway %v, %t; want %v, %t", tc.reports, got, ok, tc.want, tc.ok)
		}
	}
}
