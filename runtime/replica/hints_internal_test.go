package replica

import (
	"testing"
	"time"
)

// A primary stores its hints ahead of HintsInterval once its log grew past
// them by more than HintsGrowth of their live bytes, and more than
// MinHintsGrowth, at most once in minHintsGap; never, with a negative
// HintsGrowth.
func TestHintsPolicy(t *testing.T) {
	const MiB = 1 << 20
	var t0 = time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		cfg        Config
		end, live  int64 // Of the hints stored.
		grownBy    int64 // The log's offset, past end.
		sinceTried time.Duration
		want       bool
	}{
		{"defaults, a fifth of a large state", Config{}, 1000 * MiB, 500 * MiB, 100*MiB + 1, time.Second, true},
		{"defaults, just a fifth", Config{}, 1000 * MiB, 500 * MiB, 100 * MiB, time.Second, false},
		{"defaults, a small state's floor", Config{}, 5 * MiB, 10 * MiB, DefaultMinHintsGrowth + 1, time.Second, true},
		{"defaults, within the floor", Config{}, 5 * MiB, 10 * MiB, DefaultMinHintsGrowth, time.Second, false},
		{"too soon after the last try", Config{}, 0, 10 * MiB, 1000 * MiB, minHintsGap - time.Millisecond, false},
		{"none stored yet", Config{}, 0, 0, DefaultMinHintsGrowth + 1, time.Hour, true},
		{"a half", Config{HintsGrowth: 0.5}, 0, 100 * MiB, 50*MiB + 1, time.Second, true},
		{"within a half", Config{HintsGrowth: 0.5}, 0, 100 * MiB, 49 * MiB, time.Second, false},
		{"a floor of its own", Config{MinHintsGrowth: 1 << 10}, 0, 1 << 10, 1<<10 + 1, time.Second, true},
		{"within a floor of its own", Config{MinHintsGrowth: 1 << 10}, 0, 1 << 10, 1 << 10, time.Second, false},
		{"off", Config{HintsGrowth: -1}, 0, 1, 1 << 40, time.Hour, false},
	} {
		var p = newHintsPolicy(c.cfg)
		p.tried(t0)
		p.stored(c.end, c.live)
		if got := p.grown(t0.Add(c.sinceTried), c.end+c.grownBy); got != c.want {
			t.Errorf("%s: grown = %v, want %v", c.name, got, c.want)
		}
	}
}
