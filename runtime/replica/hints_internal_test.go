package replica

import (
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
)

// A primary stores its hints ahead of HintsInterval once a recovery from
// the last ones would read more than one from hints of now by HintsGrowth
// of the live state, and by MinHintsGrowth, whether the log grew past them
// or the files they name were replaced by smaller ones; at most once in
// minHintsGap; never, with a negative HintsGrowth.
func TestHintsPolicy(t *testing.T) {
	const MiB = 1 << 20
	var t0 = time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		cfg         Config
		end, hinted int64 // Of the hints stored.
		grownBy     int64 // The log's offset now, past end.
		hintedNow   int64 // What hints of now would read.
		live        int64 // The log's live bytes now.
		sinceTried  time.Duration
		want        bool
	}{
		{"defaults, a large state grown by a fifth", Config{}, 1000 * MiB, 500 * MiB, 100*MiB + 1, 500 * MiB, 500 * MiB, time.Second, true},
		{"defaults, a large state grown by just a fifth", Config{}, 1000 * MiB, 500 * MiB, 100 * MiB, 500 * MiB, 500 * MiB, time.Second, false},
		{"defaults, a small state past the floor", Config{}, 5 * MiB, 10 * MiB, DefaultMinHintsGrowth + 1, 10 * MiB, 10 * MiB, time.Second, true},
		{"defaults, a small state within the floor", Config{}, 5 * MiB, 10 * MiB, DefaultMinHintsGrowth, 10 * MiB, 10 * MiB, time.Second, false},
		{"hinted files replaced by smaller ones", Config{}, 1000 * MiB, 300 * MiB, 1 * MiB, 101 * MiB, 100 * MiB, time.Second, true},
		{"hinted files replaced, within the floor", Config{}, 1000 * MiB, 40 * MiB, 1 * MiB, 25 * MiB, 25 * MiB, time.Second, false},
		{"the live state grown as the log", Config{}, 1000 * MiB, 100 * MiB, 200 * MiB, 290 * MiB, 290 * MiB, time.Second, false},
		{"segments holding more than their files, as fresh hints would", Config{}, 1000 * MiB, 100 * MiB, 1 * MiB, 101 * MiB, 10 * MiB, time.Second, false},
		{"too soon after the last try", Config{}, 0, 10 * MiB, 1000 * MiB, 10 * MiB, 10 * MiB, minHintsGap - time.Millisecond, false},
		{"none stored yet, a log longer than its state", Config{}, 0, 0, 100 * MiB, 80 * MiB, 80 * MiB, time.Hour, true},
		{"none stored yet, a log as long as its state", Config{}, 0, 0, 100 * MiB, 90 * MiB, 90 * MiB, time.Hour, false},
		{"a half", Config{HintsGrowth: 0.5}, 0, 100 * MiB, 50*MiB + 1, 100 * MiB, 100 * MiB, time.Second, true},
		{"within a half", Config{HintsGrowth: 0.5}, 0, 100 * MiB, 49 * MiB, 100 * MiB, 100 * MiB, time.Second, false},
		{"a floor of its own", Config{MinHintsGrowth: 1 << 10}, 0, 1 << 10, 1<<10 + 1, 1 << 10, 1 << 10, time.Second, true},
		{"within a floor of its own", Config{MinHintsGrowth: 1 << 10}, 0, 1 << 10, 1 << 10, 1 << 10, 1 << 10, time.Second, false},
		{"off", Config{HintsGrowth: -1}, 0, 1, 1 << 40, 1, 1, time.Hour, false},
	} {
		var p = newHintsPolicy(c.cfg)
		p.tried(t0)
		p.stored(c.end, c.hinted)
		var now = recoverylog.Stats{End: c.end + c.grownBy, HintedBytes: c.hintedNow, LiveBytes: c.live}
		if got := p.due(t0.Add(c.sinceTried), func() recoverylog.Stats { return now }); got != c.want {
			t.Errorf("%s: due = %v, want %v", c.name, got, c.want)
		}
	}
}

// Hints stand while nothing is recorded past them; none stand before the
// first are stored.
func TestHintsPolicyCurrent(t *testing.T) {
	var p = newHintsPolicy(Config{})
	if p.current(recoverylog.Stats{End: 0}) {
		t.Error("current before any hints were stored")
	}
	p.stored(1000, 900)
	if !p.current(recoverylog.Stats{End: 1000, HintedBytes: 900}) {
		t.Error("not current, the log unchanged")
	}
	if p.current(recoverylog.Stats{End: 1001, HintedBytes: 900}) {
		t.Error("current, the log grown")
	}
}
