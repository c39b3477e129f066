package service

import (
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	pc "go.gazette.dev/core/consumer/protocol"
)

var (
	txnTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_transactions_total",
		Help: "Consumer transactions committed, by shard.",
	}, []string{"shard"})
	messagesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_messages_total",
		Help: "Messages consumed by committed transactions, by shard.",
	}, []string{"shard"})
	skippedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_skipped_messages_total",
		Help: "Undecodable messages skipped by committed transactions, by shard (under the label " + LabelOnDecodeError + "=skip).",
	}, []string{"shard"})
	bytesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_bytes_total",
		Help: "Bytes of messages consumed by committed transactions, by shard.",
	}, []string{"shard"})
	phaseSeconds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_transaction_phase_seconds_total",
		Help: "Time spent by transactions in each phase: stalled, finalize, commit, ack.",
	}, []string{"shard", "phase"})
	readThroughOffset = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_read_through_offset",
		Help: "Offset through which a shard has committed its reads of a source journal.",
	}, []string{"shard", "journal"})
)

func recordMetrics(id pc.ShardID, st txn.Stats) {
	var shard = id.String()
	txnTotal.WithLabelValues(shard).Inc()
	messagesTotal.WithLabelValues(shard).Add(float64(st.Messages))
	bytesTotal.WithLabelValues(shard).Add(float64(st.Bytes))
	if st.Skipped != 0 {
		skippedTotal.WithLabelValues(shard).Add(float64(st.Skipped))
	}
	phaseSeconds.WithLabelValues(shard, "stalled").Add(st.Stalled.Seconds())
	phaseSeconds.WithLabelValues(shard, "finalize").Add(st.Finalize.Seconds())
	phaseSeconds.WithLabelValues(shard, "commit").Add(st.Commit.Seconds())
	phaseSeconds.WithLabelValues(shard, "ack").Add(st.Ack.Seconds())
	for journal, src := range st.Checkpoint.Sources {
		readThroughOffset.WithLabelValues(shard, journal.String()).Set(float64(src.ReadThrough))
	}
}
