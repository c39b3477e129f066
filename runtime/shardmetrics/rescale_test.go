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
// phases' values, and its dropped rows (-1 if absent).
func rescaleGauges(t *testing.T, id string) (map[string]float64, float64) {
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
	return m.Labeled(progress.RescalePhase, "phase", "shard", id), dropped
}

// A primary's rescale gauges follow its state's phase, and are removed
// when it has none, or stops.
func TestRescaleGauges(t *testing.T) {
	var id = pc.ShardID("rescale-gauges")
	for _, tc := range []struct {
		st      runtime.RescaleState
		phases  map[string]float64
		dropped float64
	}{
		{runtime.RescaleState{}, map[string]float64{}, -1},
		{runtime.RescaleState{Phase: runtime.RescaleSplit, Index: 1, Of: 4}, map[string]float64{"split": 1}, -1},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Index: 1, Of: 4}, map[string]float64{"dropping": 1}, 0},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Index: 1, Of: 4, Dropped: 250}, map[string]float64{"dropping": 1}, 250},
		{runtime.RescaleState{Index: 1, Of: 4}, map[string]float64{}, -1},
		{runtime.RescaleState{Phase: runtime.RescaleDropping, Dropped: 3}, map[string]float64{"dropping": 1}, 3},
	} {
		Rescale(id, tc.st)
		var phases, dropped = rescaleGauges(t, id.String())
		if len(phases) != len(tc.phases) || dropped != tc.dropped {
			t.Errorf("after %+v: phases %v, dropped %v; want %v, %v", tc.st, phases, dropped, tc.phases, tc.dropped)
		}
		for p, v := range tc.phases {
			if phases[p] != v {
				t.Errorf("after %+v: phase %s is %v, want %v", tc.st, p, phases[p], v)
			}
		}
	}
	ForgetRescale(id)
	if phases, dropped := rescaleGauges(t, id.String()); len(phases) != 0 || dropped != -1 {
		t.Errorf("forgotten: phases %v, dropped %v", phases, dropped)
	}
}
