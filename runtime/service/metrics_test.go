package service_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A member exports, per shard, its transactions and their durations, the
// messages and bytes they consumed, its reads' offsets and lag, and the
// progress of its standby's recovery-log playback.
func TestMetricsDescribeShards(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var a = start(t, c, "member-a")
	start(t, c, "member-b")
	must(t, c.ApplyShards(ctx, a, nil))
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)

	var shard = map[string]string{"shard": "shard-0"}
	var source = map[string]string{"shard": "shard-0", "journal": c.Input(0).String()}
	var before = scrape(t)
	head0, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(0))
	must(t, err)
	must(t, feed.Publish(300))
	head1, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(0))
	must(t, err)
	must(t, c.WaitCaughtUp(ctx))
	var after = scrape(t)

	var delta = func(name string) float64 { return after.value(name, shard) - before.value(name, shard) }
	var txns = delta("gazconsumer_shard_transactions_total")
	if got := delta("gazconsumer_shard_messages_total"); got != 300 {
		t.Errorf("messages consumed: %v, want 300", got)
	}
	if got := delta("gazconsumer_shard_bytes_total"); got != float64(head1-head0) {
		t.Errorf("bytes consumed: %v, want the %d bytes appended", got, head1-head0)
	}
	if txns < 1 || txns > 300 {
		t.Errorf("%v transactions consumed 300 messages", txns)
	}
	if got := after.count("gazconsumer_shard_transaction_duration_seconds", shard) - before.count("gazconsumer_shard_transaction_duration_seconds", shard); float64(got) != txns {
		t.Errorf("%d transaction durations observed, for %v transactions", got, txns)
	}
	if got := delta("gazconsumer_shard_transaction_duration_seconds"); got <= 0 || got > time.Minute.Seconds()*txns {
		t.Errorf("transactions took %vs in all", got)
	}
	var consume = after.value("gazconsumer_shard_transaction_phase_seconds_total", map[string]string{"shard": "shard-0", "phase": "consume"})
	if consume <= 0 {
		t.Errorf("transactions spent %vs consuming", consume)
	}
	if got := after.value("gazconsumer_shard_read_through_offset", source); got != float64(head1) {
		t.Errorf("read through offset %v, want %d", got, head1)
	}
	if got, ok := after.find("gazconsumer_shard_read_lag_bytes", source); !ok || got.GetGauge().GetValue() != 0 {
		t.Errorf("read lag of a caught-up shard: %v", got)
	}
	// The shard's sequencer counted each message it read, by its outcome.
	var input = map[string]string{"journal": c.Input(0).String()}
	if got := after.sum("gazconsumer_sequencer_queued_total", input) - before.sum("gazconsumer_sequencer_queued_total", input); got < 300 {
		t.Errorf("the sequencer queued %v messages of %s, want at least the 300 published", got, c.Input(0))
	}

	// Gazette's metrics say the same, under the shard's fully qualified name.
	var fqn = map[string]string{"shard": c.Prefix + "/items/shard-0"}
	var gdelta = func(name string) float64 { return after.value(name, fqn) - before.value(name, fqn) }
	if got := gdelta("gazette_shard_transactions_total"); got != txns {
		t.Errorf("gazette_shard_transactions_total grew by %v, gazconsumer's by %v", got, txns)
	}
	if got := gdelta("gazette_shard_read_messages_total"); got != 300 {
		t.Errorf("gazette_shard_read_messages_total grew by %v, want 300", got)
	}
	if got := gdelta("gazette_shard_read_bytes_total"); got != float64(head1-head0) {
		t.Errorf("gazette_shard_read_bytes_total grew by %v, want %d", got, head1-head0)
	}
	if got := after.value("gazette_shard_read_head", map[string]string{"shard": fqn["shard"], "journal": c.Input(0).String()}); got != float64(head1) {
		t.Errorf("gazette_shard_read_head %v, want %d", got, head1)
	}
	for _, phase := range []string{"10-not-running", "20-consuming", "30-stalled", "40-preparing", "50-committing", "60-acknowledging"} {
		if _, ok := after.find("gazette_shard_phase_seconds_total", map[string]string{"shard": fqn["shard"], "phase": phase}); !ok {
			t.Errorf("gazette_shard_phase_seconds_total lacks phase %s", phase)
		}
	}
	if got := after.value("gazette_shard_phase_seconds_total", map[string]string{"shard": fqn["shard"], "phase": "20-consuming", "type": "sync"}); got <= 0 {
		t.Errorf("gazette_shard_phase_seconds_total: %vs consuming", got)
	}
	// The primary is up; the standby's status is checked once it has caught
	// up with the log (it is BACKFILL until then), below.
	if got := after.value("gazette_shard_up", map[string]string{"shard": "shard-0", "status": "PRIMARY"}); got != 1 {
		t.Errorf("gazette_shard_up{status=\"PRIMARY\"} is %v, want 1", got)
	}
	for _, name := range []string{"gazconsumer_shard_failures_total", "gazconsumer_shard_commit_failures_total"} {
		if _, ok := after.find(name, shard); !ok || delta(name) != 0 {
			t.Errorf("%s of a healthy shard: present %v, grew by %v", name, ok, delta(name))
		}
	}
	for _, id := range []string{"member-a", "member-b"} {
		if got := after.value("gazconsumer_member_ready", map[string]string{"member": id}); got != 1 {
			t.Errorf("gazconsumer_member_ready{member=%q} is %v, want 1", id, got)
		}
	}
	if got := after.value("gazette_recoverylog_recovered_bytes_total", nil); got <= 0 {
		t.Errorf("gazette_recoverylog_recovered_bytes_total is %v", got)
	}

	// The standby plays the log as the primary writes it, through its head.
	for {
		var m = scrape(t)
		logHead, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.ShardSpec(0).RecoveryLog())
		must(t, err)
		var played, remaining = m.value("gazconsumer_shard_recovery_played_bytes", shard), m.value("gazconsumer_shard_recovery_remaining_bytes", shard)
		if played < 0 || played > float64(logHead) || remaining < 0 || remaining > float64(logHead) {
			t.Fatalf("standby played %v bytes and has %v to play, of a log of %d", played, remaining, logHead)
		}
		if played > 0 && remaining == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the standby did not catch up with the recovery log: played %v, %v to play", played, remaining)
		case <-time.After(20 * time.Millisecond):
		}
	}

	// Tailing the log, the standby reports itself STANDBY: its member reads
	// the status back from etcd, where the replica wrote it.
	var standby = map[string]string{"shard": "shard-0", "status": "STANDBY"}
	for scrape(t).value("gazette_shard_up", standby) != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("gazette_shard_up{status=\"STANDBY\"} is not 1, though the standby tails the log")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// The member serves them at /metrics.
	var m, _ = c.PrimaryOf(ctx, "shard-0")
	resp, err := http.Get(m.Svc.Endpoint().URL().String() + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	for _, name := range []string{"gazconsumer_shard_transactions_total", "gazconsumer_shard_read_lag_bytes", "gazconsumer_shard_recovery_played_bytes"} {
		if !strings.Contains(string(body), name+`{`) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// metrics are scraped metric families, by name.
type metrics map[string]*dto.MetricFamily

func scrape(t *testing.T) metrics {
	t.Helper()
	var mfs, err = prometheus.DefaultGatherer.Gather()
	must(t, err)
	var out = make(metrics, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// find returns the metric of name whose labels include labels.
func (ms metrics) find(name string, labels map[string]string) (*dto.Metric, bool) {
	for _, m := range ms[name].GetMetric() {
		if hasLabels(m, labels) {
			return m, true
		}
	}
	return nil, false
}

// hasLabels reports whether the labels of m include labels.
func hasLabels(m *dto.Metric, labels map[string]string) bool {
	var n int
	for _, lp := range m.Label {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// value is the value of a counter or gauge, or the sum of a histogram; zero
// if there's no such metric.
func (ms metrics) value(name string, labels map[string]string) float64 {
	var m, ok = ms.find(name, labels)
	switch {
	case !ok:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return m.Histogram.GetSampleSum()
	}
	return 0
}

// sum is the sum of the counters of name whose labels include labels.
func (ms metrics) sum(name string, labels map[string]string) float64 {
	var total float64
	for _, m := range ms[name].GetMetric() {
		if hasLabels(m, labels) {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// count is the number of observations of a histogram.
func (ms metrics) count(name string, labels map[string]string) uint64 {
	if m, ok := ms.find(name, labels); ok && m.Histogram != nil {
		return m.Histogram.GetSampleCount()
	}
	return 0
}
