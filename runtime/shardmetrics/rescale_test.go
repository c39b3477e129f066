package shardmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// rescaleGauges returns the rescale gauges of shard id in the default
// registry, read by the names the console reads (package progress): its
// phases' values, its dropped rows and how far its drop went (-1 if absent).
func rescaleGauges(t *testing.T, id string) (map[string]float64, float64, float64) {
	t.Helper()
	var fams, err = prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var m = make(progress.Metrics)
	for _, f := range fams {
		m[f.GetName()] = f
	}
	var dropped = -1.0
	if m.Has(progress.RescaleDropped, "shard", id) {
		dropped = m.Value(progress.RescaleDropped, "shard", id)
	}
	var through = -1.0
	if m.Has(progress.RescaleThrough, "shard", id) {
		through = m.Value(progress.RescaleThrough, "shard", id)
	}
	return m.Labeled(progress.RescalePhase, "phase", "shard", id), dropped, through
}

// A primary's rescale gauges follow its state's phase, and are removed
// when it has none, or stops.
func TestRescaleGauges(t *testing.T) {
	var id = pc.ShardID("rescale-gauges")
	for _, tc := range []struct {
		st               runtime.RescaleState
		phases           map[string]float64
		dropped, through float64
	}{
		{runtime.RescaleState{}, map[string]float64{}, -1, -1},
		{runtime.RescaleState{Phase: runtime.RescaleSplit, Index: 1, Of: 4}, map[string]float64{"split": 1}, -1, -1},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Index: 1, Of: 4}, map[string]float64{"dropping": 1}, 0, 0},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Index: 1, Of: 4, Dropped: 250, Through: 0.25}, map[string]float64{"dropping": 1}, 250, 0.25},
		// Its store can't tell how far it went.
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Index: 1, Of: 4, Dropped: 300, Through: -1}, map[string]float64{"dropping": 1}, 300, -1},
		{runtime.RescaleState{Index: 1, Of: 4}, map[string]float64{}, -1, -1},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Dropped: 3, Through: 1}, map[string]float64{"dropping": 1}, 3, 1},
	} {
		Rescale(id, tc.st)
		var phases, dropped, through = rescaleGauges(t, id.String())
		if len(phases) != len(tc.phases) || dropped != tc.dropped || through != tc.through {
			t.Errorf("after %+v: phases %v, dropped %v, through %v; want %v, %v, %v", tc.st, phases, dropped, through, tc.phases, tc.dropped, tc.through)
		}
		for p, v := range tc.phases {
			if phases[p] != v {
				t.Errorf("after %+v: phase %s is %v, want %v", tc.st, p, phases[p], v)
			}
		}
	}
	ForgetRescale(id)
	if phases, dropped, through := rescaleGauges(t, id.String()); len(phases) != 0 || dropped != -1 || through != -1 {
		t.Errorf("forgotten: phases %v, dropped %v, through %v", phases, dropped, through)
	}
}
