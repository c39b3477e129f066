package recoverylog

import (
	"errors"
	"log/slog"
	"sync"

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
	playbacks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_playbacks_total",
		Help: "Playbacks begun by recovery log players, by where they read persisted fragments of their logs: store (straight from the fragment store, through the URLs brokers sign) or brokers.",
	}, []string{"reads"})
	mappedBytesPlayed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_mapped_bytes_total",
		Help: "Bytes of hinted log content which recovery log players mapped from the files of file:// fragment stores under their root (rather than read through URLs or brokers).",
	})
	recordedBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "gazconsumer_recoverylog_recorded_bytes_total",
		Help: "Bytes of ops and data written by recovery log recorders.",
	})
)

// recoveredBytes returns Gazette's counter gazette_recoverylog_recovered_bytes_total,
// of the bytes of file data that players wrote to local disk. Gazette's
// consumer/recoverylog package (which Gazette's consumer/protocol imports)
// registers it as it is initialized, and never counts: players count into
// it, or into one registered in its place if that package is not linked
// in. It is looked up once, after every package is initialized.
var recoveredBytes = sync.OnceValue(func() prometheus.Counter {
	var c = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gazette_recoverylog_recovered_bytes_total",
		Help: "Cumulative number of bytes recovered to local disk from recovery logs.",
	})
	var are prometheus.AlreadyRegisteredError
	if err := prometheus.Register(c); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(prometheus.Counter); ok {
			return existing
		}
	} else if err != nil {
		slog.Warn("registering gazette_recoverylog_recovered_bytes_total", "err", err)
	}
	return c
})
