package recoverylog

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	playedOps = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_played_ops_total",
		Help: "Ops read by recovery log players, by outcome: played, unneeded (of a node dead at the hints), or skipped (of a dead branch, or copies of ops already played).",
	}, []string{"outcome"})
	playedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_played_bytes_total",
		Help: "Bytes of ops and data played by recovery log players.",
	})
	rebasedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_rebased_bytes_total",
		Help: "Bytes of live files re-recorded at the head of recovery logs by log compaction.",
	})
	duplicatedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_duplicated_bytes_total",
		Help: "Bytes of copies of their own appends which recovery log recorders found in their logs (appended again after a lost acknowledgement), and skipped.",
	})
	recordedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_recorded_bytes_total",
		Help: "Bytes of ops and data written by recovery log recorders.",
	})
)
