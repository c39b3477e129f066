package service_test

import (
	"context"
	"testing"
	"time"

	pc "go.gazette.dev/core/consumer/protocol"
)

// BenchmarkConsumeVsRawRead consumes 100,000 messages per iteration with
// four shards on one member, end to end (RocksDB stores recorded into
// recovery logs, exactly-once transactions publishing onward), and reports
// that rate against the rate of reading and decoding the same journals.
func BenchmarkConsumeVsRawRead(b *testing.B) {
	var ctx, cancel = context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var c = newCluster(b, 4)
	var m, err = c.Start("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Kill()

	b.ResetTimer()
	tp, err := c.MeasureThroughput(ctx, 100000*b.N, func(s *pc.ShardSpec) { s.HotStandbys = 0 })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(tp.ConsumeRate(), "consumed-msgs/s")
	b.ReportMetric(tp.RawRate(), "raw-read-msgs/s")
	b.ReportMetric(tp.Ratio(), "consume/raw")
}
