package shardmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	pb "go.gazette.dev/core/broker/protocol"
)

// The read lag gauge is checked against the clock once a read response
// (whose write head it's measured from), at most every lagReportInterval,
// but for a lag reaching zero, which is reported at once.
func TestLagReporter(t *testing.T) {
	var r = LagReporter{shard: "lag-test", journal: "j", last: -1, response: -1}
	var gauge = func() float64 { return testutil.ToFloat64(readLagBytes.WithLabelValues("lag-test", "j")) }
	defer readLagBytes.DeleteLabelValues("lag-test", "j")
	for _, step := range []struct {
		lag, response int64
		ago           time.Duration // Set the last report this long ago first, if not zero.
		want          float64
	}{
		{lag: 100, response: 0, want: 100},                         // The first report.
		{lag: 90, response: 0, ago: time.Second, want: 100},        // The same response: not checked.
		{lag: 80, response: 500, ago: time.Millisecond, want: 100}, // A new response, within the interval.
		{lag: 0, response: 500, want: 0},                           // Zero, at once.
		{lag: 70, response: 900, ago: time.Second, want: 70},
		{lag: 60, response: 1300, ago: time.Second, want: 60},
	} {
		if step.ago != 0 {
			r.at = time.Now().Add(-step.ago)
		}
		r.Report(step.lag, pb.Offset(step.response))
		if got := gauge(); got != step.want {
			t.Fatalf("after a lag of %d in the response at %d: gauge %v, want %v", step.lag, step.response, got, step.want)
		}
	}
}
