// Package shardmetrics holds the Prometheus metrics of a member's shard
// replicas: gazconsumer's own (transactions, their phases, messages, bytes,
// skips, handler retries and dead letters, failures, read offsets and lag,
// recovery progress, the phase of a rescale) and those of Gazette's
// consumers that they fill with the same meaning
// (gazette_shard_transactions_total, gazette_shard_read_*,
// gazette_shard_phase_seconds_total), registered with Prometheus' default
// registry. A replica records into them as it recovers, reads and commits.
package shardmetrics

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
)

// The metrics of shards, registered with Prometheus' default registry and
// served at /metrics on the member's port. Counters grow as transactions
// commit; gauges describe the replicas of this member, and are removed when
// a replica stops.
var (
	txnTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_transactions_total",
		Help: "Consumer transactions committed, by shard.",
	}, []string{"shard"})
	txnSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gazconsumer_shard_transaction_duration_seconds",
		Help:    "Duration of committed transactions, from their first message until their commit and acknowledgements are done, by shard.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms to 33s.
	}, []string{"shard"})
	phaseSeconds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_transaction_phase_seconds_total",
		Help: "Time spent by committed transactions in each phase: consume, stalled, finalize, commit, ack.",
	}, []string{"shard", "phase"})
	messagesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_messages_total",
		Help: "Messages consumed by committed transactions, by shard.",
	}, []string{"shard"})
	bytesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_bytes_total",
		Help: "Bytes of messages consumed by committed transactions, by shard.",
	}, []string{"shard"})
	skippedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_skipped_messages_total",
		Help: "Undecodable messages skipped by committed transactions, by shard (under the label " + source.LabelOnDecodeError + "=skip).",
	}, []string{"shard"})
	retriesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_handler_retries_total",
		Help: "Retries of failed handler calls by committed transactions, by shard (under the handlers' failure policies).",
	}, []string{"shard"})
	deadLettersTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_dead_letters_total",
		Help: "Messages whose handlers failed, recorded into the dead-letter journal by committed transactions, by shard (under the handlers' failure policies).",
	}, []string{"shard"})
	readThroughOffset = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_read_through_offset",
		Help: "Offset through which a primary has committed its reads of a source journal.",
	}, []string{"shard", "journal"})
	readLagBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_read_lag_bytes",
		Help: "Bytes of a source journal beyond what a primary has read: the journal's write head, as the broker last told the shard's reader, less the offset the reader has read through.",
	}, []string{"shard", "journal"})
	recoveryPlayedBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_recovery_played_bytes",
		Help: "Bytes of its recovery log that a replica recovering the shard, or standing by, has read and played.",
	}, []string{"shard"})
	recoveryRemainingBytes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_recovery_remaining_bytes",
		Help: "Bytes of its recovery log that a replica recovering the shard, or standing by, has yet to read to reach the log's write head (as the broker last told it).",
	}, []string{"shard"})
	failuresTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_failures_total",
		Help: "Replicas of a shard that failed (and set its status FAILED) on this member, by shard.",
	}, []string{"shard"})
	commitFailuresTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_shard_commit_failures_total",
		Help: "Transactions of a shard whose commit to its store failed, failing the primary, by shard.",
	}, []string{"shard"})
	rescalePhase = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_rescale_phase",
		Help: "1 for the phase of a rescale a primary's state is in (split: it keeps the rows it no longer owns, hidden, for the new shards; dropping: the rescale ended and it deletes them), by shard; absent once no work of a rescale is left.",
	}, []string{"shard", "phase"})
	rescaleDropped = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_rescale_dropped_rows",
		Help: "Rows (and timers) a primary whose rescale ended has deleted so far of those it no longer owns, by shard; absent unless it is dropping them.",
	}, []string{"shard"})
	rescaleThrough = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazconsumer_shard_rescale_drop_progress_ratio",
		Help: "Share (0 to 1) of its state's bytes, as its store estimates them, that a primary whose rescale ended has gone through, dropping what it no longer owns, by shard; absent unless it is dropping them and its store can estimate them.",
	}, []string{"shard"})
)

// Gazette's consumer metrics (package go.gazette.dev/core/consumer, which
// gazconsumer does not import), with their names, types, labels and
// meaning. As in Gazette, the transaction metrics' label shard is the
// shard's fully qualified name, the etcd key of its spec
// (<prefix>/items/<id>), and gazette_shard_up's is the shard's ID.
var (
	gazetteTxnTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazette_shard_transactions_total",
		Help: "Total number of consumer transactions.",
	}, []string{"shard"})
	gazetteReadMsgsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazette_shard_read_messages_total",
		Help: "Total number of messages processed by completed consumer transactions.",
	}, []string{"shard"})
	gazetteReadBytesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazette_shard_read_bytes_total",
		Help: "Total byte-length of messages processed by completed consumer transactions.",
	}, []string{"shard"})
	gazetteReadHead = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gazette_shard_read_head",
		Help: "Current read head of the consumer (i.e., next journal byte offset to be read).",
	}, []string{"shard", "journal"})
	gazettePhaseSeconds = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazette_shard_phase_seconds_total",
		Help: "Cumulative number of seconds processing transactions.",
	}, []string{"shard", "phase", "type"})
)

// Init creates the counters of shard id that count failures and
// skips at zero, so that rules see them before a first one (increase() of
// a series that is born at 1 is 0).
func Init(id pc.ShardID) {
	skippedTotal.WithLabelValues(id.String())
	retriesTotal.WithLabelValues(id.String())
	deadLettersTotal.WithLabelValues(id.String())
	failuresTotal.WithLabelValues(id.String())
	commitFailuresTotal.WithLabelValues(id.String())
}

// Failure counts a failure of a replica of shard id, and a commit
// failure if err is one.
func Failure(id pc.ShardID, err error) {
	failuresTotal.WithLabelValues(id.String()).Inc()
	var ce *txn.CommitError
	if errors.As(err, &ce) {
		commitFailuresTotal.WithLabelValues(id.String()).Inc()
	}
}

// Committed records a committed transaction of shard id, whose fully
// qualified name is fqn, begun notRunning after its predecessor's commit
// started (zero for the first transaction of a primary).
func Committed(id pc.ShardID, fqn string, notRunning time.Duration, st txn.Stats) {
	gazetteTxnTotal.WithLabelValues(fqn).Inc()
	gazetteReadMsgsTotal.WithLabelValues(fqn).Add(float64(st.Messages))
	gazetteReadBytesTotal.WithLabelValues(fqn).Add(float64(st.Bytes))
	for journal, src := range st.Checkpoint.Sources {
		gazetteReadHead.WithLabelValues(fqn, journal.String()).Set(float64(src.ReadThrough))
	}
	// Gazette's phases: its consuming excludes the time stalled, which
	// ours includes.
	gazettePhaseSeconds.WithLabelValues(fqn, "10-not-running", "sync").Add(notRunning.Seconds())
	gazettePhaseSeconds.WithLabelValues(fqn, "20-consuming", "sync").Add(max(0, st.Consume-st.Stalled).Seconds())
	gazettePhaseSeconds.WithLabelValues(fqn, "30-stalled", "sync").Add(st.Stalled.Seconds())
	gazettePhaseSeconds.WithLabelValues(fqn, "40-preparing", "sync").Add(st.Finalize.Seconds())
	gazettePhaseSeconds.WithLabelValues(fqn, "50-committing", "async").Add(st.Commit.Seconds())
	gazettePhaseSeconds.WithLabelValues(fqn, "60-acknowledging", "async").Add(st.Ack.Seconds())

	var shard = id.String()
	txnTotal.WithLabelValues(shard).Inc()
	txnSeconds.WithLabelValues(shard).Observe((st.Consume + st.Finalize + st.Commit + st.Ack).Seconds())
	messagesTotal.WithLabelValues(shard).Add(float64(st.Messages))
	bytesTotal.WithLabelValues(shard).Add(float64(st.Bytes))
	if st.Skipped != 0 {
		skippedTotal.WithLabelValues(shard).Add(float64(st.Skipped))
	}
	if st.Retries != 0 {
		retriesTotal.WithLabelValues(shard).Add(float64(st.Retries))
	}
	if st.DeadLettered != 0 {
		deadLettersTotal.WithLabelValues(shard).Add(float64(st.DeadLettered))
	}
	phaseSeconds.WithLabelValues(shard, "consume").Add(st.Consume.Seconds())
	phaseSeconds.WithLabelValues(shard, "stalled").Add(st.Stalled.Seconds())
	phaseSeconds.WithLabelValues(shard, "finalize").Add(st.Finalize.Seconds())
	phaseSeconds.WithLabelValues(shard, "commit").Add(st.Commit.Seconds())
	phaseSeconds.WithLabelValues(shard, "ack").Add(st.Ack.Seconds())
	for journal, src := range st.Checkpoint.Sources {
		readThroughOffset.WithLabelValues(shard, journal.String()).Set(float64(src.ReadThrough))
	}
}

// ForgetReads removes the gauges of a primary's reads of shard id, whose
// fully qualified name is fqn.
func ForgetReads(id pc.ShardID, fqn string) {
	gazetteReadHead.DeletePartialMatch(prometheus.Labels{"shard": fqn})
	readThroughOffset.DeletePartialMatch(prometheus.Labels{"shard": id.String()})
	readLagBytes.DeletePartialMatch(prometheus.Labels{"shard": id.String()})
}

// Rescale sets the rescale gauges of the primary of shard id, whose state
// stands at st.
func Rescale(id pc.ShardID, st runtime.RescaleState) {
	var shard = id.String()
	for _, phase := range []string{runtime.RescaleSplit, runtime.RescaleDropping} {
		if phase == st.Phase {
			rescalePhase.WithLabelValues(shard, phase).Set(1)
		} else {
			rescalePhase.DeleteLabelValues(shard, phase)
		}
	}
	if st.Phase == runtime.RescaleDropping {
		rescaleDropped.WithLabelValues(shard).Set(float64(st.Dropped))
	} else {
		rescaleDropped.DeleteLabelValues(shard)
	}
	if st.Phase == runtime.RescaleDropping && st.Through >= 0 {
		rescaleThrough.WithLabelValues(shard).Set(st.Through)
	} else {
		rescaleThrough.DeleteLabelValues(shard)
	}
}

// ForgetRescale removes the rescale gauges of shard id.
func ForgetRescale(id pc.ShardID) { Rescale(id, runtime.RescaleState{}) }

// ForgetRecovery removes the gauges of the recovery of shard id.
func ForgetRecovery(id pc.ShardID) {
	recoveryPlayedBytes.DeleteLabelValues(id.String())
	recoveryRemainingBytes.DeleteLabelValues(id.String())
}

// LagReporter sets the read lag gauge of a source of a shard as it changes,
// at most every lagReportInterval unless the lag drops to zero. The write
// head, which the lag is measured from, is learned with each read response:
// within one, the lag changes only as messages are read, and the clock is
// read (for the interval) only on the first message of a response, or as
// the lag reaches zero.
type LagReporter struct {
	shard, journal string
	last           int64
	response       pb.Offset // Offset of the read response of the last check.
	at             time.Time
}

// NewLagReporter returns the LagReporter of source journal of shard.
func NewLagReporter(shard pc.ShardID, journal pb.Journal) *LagReporter {
	return &LagReporter{shard: shard.String(), journal: journal.String(), last: -1, response: -1}
}

const lagReportInterval = 100 * time.Millisecond

// Report reports the lag of a message read from the response whose content
// begins at offset response.
func (r *LagReporter) Report(lag int64, response pb.Offset) {
	if lag == r.last || lag != 0 && response == r.response {
		return
	}
	r.response = response
	var now = time.Now()
	if lag != 0 && now.Sub(r.at) < lagReportInterval {
		return
	}
	// Look the gauge up anew: a replica stopping may have removed it.
	readLagBytes.WithLabelValues(r.shard, r.journal).Set(float64(lag))
	r.last, r.at = lag, now
}

// RecoveryProgress follows the playback of a recovery log, and sets the
// shard's recovery gauges: bytes played, from the player, and bytes still to
// play, to the write head that the log's read responses report.
type RecoveryProgress struct {
	shard string
	head  atomic.Int64 // Write head, as last reported.
}

// NewRecoveryProgress returns the RecoveryProgress of shard id.
func NewRecoveryProgress(id pc.ShardID) *RecoveryProgress {
	return &RecoveryProgress{shard: id.String()}
}

// Follow sets the gauges from player until done closes.
func (p *RecoveryProgress) Follow(player *recoverylog.Player, done <-chan struct{}) {
	var ticker = time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		recoveryPlayedBytes.WithLabelValues(p.shard).Set(float64(player.BytesRead()))
		recoveryRemainingBytes.WithLabelValues(p.shard).Set(float64(max(0, p.head.Load()-player.Offset())))
		select {
		case <-ticker.C:
		case <-done:
			return
		}
	}
}

// JournalClient returns a client of jc whose reads of journal tell p of the
// write head.
func (p *RecoveryProgress) JournalClient(jc pb.RoutedJournalClient, journal pb.Journal) pb.RoutedJournalClient {
	return progressClient{RoutedJournalClient: jc, journal: journal, p: p}
}

type progressClient struct {
	pb.RoutedJournalClient
	journal pb.Journal
	p       *RecoveryProgress
}

func (c progressClient) Read(ctx context.Context, req *pb.ReadRequest, opts ...grpc.CallOption) (pb.Journal_ReadClient, error) {
	var stream, err = c.RoutedJournalClient.Read(ctx, req, opts...)
	if err != nil || req.Journal != c.journal {
		return stream, err
	}
	return progressStream{Journal_ReadClient: stream, p: c.p}, nil
}

type progressStream struct {
	pb.Journal_ReadClient
	p *RecoveryProgress
}

// RecvMsg is how client.Reader receives responses.
func (s progressStream) RecvMsg(m any) error {
	var err = s.Journal_ReadClient.RecvMsg(m)
	if resp, ok := m.(*pb.ReadResponse); ok && err == nil {
		s.p.observe(resp)
	}
	return err
}

// Recv receives a response.
func (s progressStream) Recv() (*pb.ReadResponse, error) {
	var resp, err = s.Journal_ReadClient.Recv()
	if err == nil {
		s.p.observe(resp)
	}
	return resp, err
}

func (p *RecoveryProgress) observe(resp *pb.ReadResponse) {
	if resp.Status == pb.Status_OK && resp.WriteHead > p.head.Load() {
		p.head.Store(resp.WriteHead)
	}
}
