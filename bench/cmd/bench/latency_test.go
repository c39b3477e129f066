package main

import "testing"

func TestPercentile(t *testing.T) {
	// 100 messages: 90 of one append at 1 ms, 9 at 10 ms, 1 at 100 ms.
	var v = []weighted{{v: 0.010, n: 9}, {v: 0.100, n: 1}, {v: 0.001, n: 90}}
	for _, tc := range []struct{ p, want float64 }{
		{0.5, 0.001}, {0.9, 0.001}, {0.95, 0.010}, {0.99, 0.010}, {0.999, 0.100}, {1, 0.100},
	} {
		if got := percentile(v, tc.p); got != tc.want {
			t.Errorf("percentile %v: %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing: %v, want 0", got)
	}
}
