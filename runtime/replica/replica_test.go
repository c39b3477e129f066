package replica_test

import (
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime/replica"
	pc "go.gazette.dev/core/consumer/protocol"
)

// A replica starts over for changes of what it fixes as it starts (its
// sources, recovery log, hints and buffers), and not for those a running
// replica applies (transaction bounds, labels).
func TestRestartReason(t *testing.T) {
	var base = func() *pc.ShardSpec {
		return &pc.ShardSpec{
			Sources:           []pc.ShardSpec_Source{{Journal: "in/part-00"}},
			RecoveryLogPrefix: "recovery",
			HintPrefix:        "/hints",
			HintBackups:       2,
			MaxTxnDuration:    1e9,
		}
	}
	for _, c := range []struct {
		name   string
		change func(*pc.ShardSpec)
		want   string
	}{
		{"none", func(*pc.ShardSpec) {}, ""},
		{"txn bounds and labels", func(s *pc.ShardSpec) {
			s.MaxTxnDuration, s.MinTxnDuration = 2e9, 1e6
			s.LabelSet.AddValue("gazconsumer.dev/on-decode-error", "skip")
		}, ""},
		{"sources", func(s *pc.ShardSpec) { s.Sources = append(s.Sources, pc.ShardSpec_Source{Journal: "in/part-01"}) }, "sources"},
		{"log", func(s *pc.ShardSpec) { s.RecoveryLogPrefix = "other" }, "recovery_log_prefix"},
		{"hints", func(s *pc.ShardSpec) { s.HintBackups = 3 }, "hints"},
		{"all", func(s *pc.ShardSpec) {
			s.Sources, s.RecoveryLogPrefix, s.HintPrefix, s.ReadChannelSize = nil, "other", "/other", 16
		}, "sources, recovery_log_prefix, hints, buffer sizes"},
	} {
		var next = base()
		c.change(next)
		if got := replica.RestartReason(base(), next); got != c.want {
			t.Errorf("%s: RestartReason = %q, want %q", c.name, got, c.want)
		}
	}
}
