package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// metricsOf parses text, in Prometheus' text format, as a member's metrics.
func metricsOf(t *testing.T, text string) progress.Metrics {
	t.Helper()
	var p = expfmt.NewTextParser(model.UTF8Validation)
	var fams, err = p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return progress.Metrics(fams)
}

// rescaleShard returns a shard id of status st, labeled by labels (pairs of
// name and value), whose primary's metrics are text.
func rescaleShard(t *testing.T, id, st, text string, labels ...string) *Shard {
	t.Helper()
	var spec = &pc.ShardSpec{Id: pc.ShardID(id)}
	for i := 0; i+1 < len(labels); i += 2 {
		spec.LabelSet.AddValue(labels[i], labels[i+1])
	}
	var sh = &Shard{ID: id, Group: "ledger", Status: st, Spec: spec, Lag: -1, MsgRate: -1, TxnRate: -1}
	sh.readCounters(metricsOf(t, text))
	return sh
}

// The console shows where each shard, and its group, stand in a rescale:
// from the labels `gazconsumer rescale` puts on the shards' specs, and the
// phase their primaries' metrics report.
func TestConsoleShowsRescales(t *testing.T) {
	var phase = func(id, phase string) string {
		return `gazconsumer_shard_rescale_phase{shard="` + id + `",phase="` + phase + `"} 1` + "\n"
	}
	var to, from = runtime.LabelSplitTo, runtime.LabelSplitFrom
	var during = &Group{Name: "ledger", Shards: []*Shard{
		rescaleShard(t, "ledger-00", StatusPrimary, phase("ledger-00", runtime.RescaleSplit), to, "4"),
		rescaleShard(t, "ledger-01", StatusPrimary, "", to, "4"),
		rescaleShard(t, "ledger-02", StatusPrimary, phase("ledger-02", runtime.RescaleSplit), to, "4", from, "ledger-00"),
		rescaleShard(t, "ledger-03", StatusRecovering, "", to, "4", from, "ledger-01"),
		// Forked from a copy of the rows it owns: nothing hidden.
		rescaleShard(t, "ledger-05", StatusPrimary, "", to, "4", from, "ledger-01"),
	}}
	var after = &Group{Name: "ledger", Shards: []*Shard{
		rescaleShard(t, "ledger-00", StatusPrimary, phase("ledger-00", runtime.RescaleDropping)+
			`gazconsumer_shard_rescale_dropped_rows{shard="ledger-00"} 1234`+"\n"+
			`gazconsumer_shard_rescale_drop_progress_ratio{shard="ledger-00"} 0.4`+"\n"),
		rescaleShard(t, "ledger-01", StatusPrimary, phase("ledger-01", runtime.RescaleDropping)),
		rescaleShard(t, "ledger-02", StatusPrimary, ""),
		// Another shard's metrics are not this one's.
		rescaleShard(t, "ledger-03", StatusPrimary, phase("ledger-00", runtime.RescaleSplit)),
		// The labels removed, its next transaction drops.
		rescaleShard(t, "ledger-04", StatusPrimary, phase("ledger-04", runtime.RescaleSplit)),
	}}
	for _, tc := range []struct {
		g      *Group
		banner string
		shards []string
	}{
		{during, "Rescaling to 4 partitions: 2 of 3 new shards primary.", []string{
			"split to 4 partitions; keeps the rows of its new shards, hidden, until the rescale ends",
			"to split to 4 partitions at its next transaction",
			"new, forked from ledger-00; keeps its parent's other rows, hidden, until the rescale ends",
			"new, forking from ledger-01",
			"new, forked from ledger-01",
		}},
		{after, "Rescale ended: ledger-00, ledger-01, ledger-04 still dropping the rows they no longer own.", []string{
			"rescale ended; dropping the rows it no longer owns (1234 so far, 40% of its state gone through)",
			// Its store can't tell how far it has gone.
			"rescale ended; dropping the rows it no longer owns (0 so far)",
			"",
			"",
			"rescale ended; drops the rows it no longer owns from its next transaction",
		}},
		{&Group{Name: "ledger", Shards: []*Shard{rescaleShard(t, "ledger-00", StatusPrimary, "")}}, "", []string{""}},
	} {
		if got := tc.g.Rescale(); got != tc.banner {
			t.Errorf("group's rescale %q, want %q", got, tc.banner)
		}
		for i, sh := range tc.g.Shards {
			if got := sh.Rescale(); got != tc.shards[i] {
				t.Errorf("shard %s's rescale %q, want %q", sh.ID, got, tc.shards[i])
			}
		}
	}

	// The consumers page and the shard's page show them.
	var c = newConsole(t, brokerconn.Security{})
	var rd = &Reading{Groups: []*Group{during}}
	var buf bytes.Buffer
	if err := c.pages["consumers"].ExecuteTemplate(&buf, "live", &view{Reading: rd}); err != nil {
		t.Fatal(err)
	}
	expect(t, "the consumers page", buf.String(),
		`<p class="rescale group-rescale">Rescaling to 4 partitions: 2 of 3 new shards primary.</p>`,
		`data-shard="ledger-02" data-status="PRIMARY" data-rate="-1" data-lag="-1" data-rescale="split"`,
		`<div class="rescale">new, forking from ledger-01</div>`)
	buf.Reset()
	if err := c.pages["shard"].ExecuteTemplate(&buf, "live", &view{Reading: rd, Group: during, Shard: during.Shards[0]}); err != nil {
		t.Fatal(err)
	}
	expect(t, "the shard page", buf.String(), `<p class="rescale shard-rescale">Rescale: split to 4 partitions; keeps the rows of its new shards, hidden, until the rescale ends</p>`)
}
