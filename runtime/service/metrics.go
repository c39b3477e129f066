package service

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.gazette.dev/core/allocator"
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

	shardUpDesc = prometheus.NewDesc(
		"gazette_shard_up",
		"Indicates the processing status of a shard by this consumer.",
		[]string{"shard", "status"}, nil)
)

// memberReadyDesc describes gazconsumer_member_ready.
var memberReadyDesc = prometheus.NewDesc(
	"gazconsumer_member_ready",
	"1 while the member is ready (as /debug/ready answers 200: joined its group, not exiting, no FAILED shard unless --consumer.ready-ignores-failed), 0 otherwise, by member ID.",
	[]string{"member"}, nil)

// members are the Services running in the process, which memberCollector
// reports on.
var members sync.Map // Of *Service.

func init() { prometheus.MustRegister(memberCollector{}) }

// memberCollector collects, of the members running in the process,
// gazconsumer_member_ready and gazette_shard_up: 1 for each replica of a
// shard that a member runs, labelled with the shard's ID and the replica's
// status (PRIMARY, STANDBY, BACKFILL, FAILED, IDLE), as Gazette's
// consumer.Resolver collects it. Replicas of one shard with one status in
// several members of the process are one series.
type memberCollector struct{}

// Describe implements prometheus.Collector.
func (memberCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardUpDesc
	ch <- memberReadyDesc
}

// Collect implements prometheus.Collector.
func (memberCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ shard, status string }
	var seen = make(map[key]bool)
	var ready = make(map[string]float64) // Of member IDs; a member ID twice in a process (in tests) is ready if all are.
	members.Range(func(m, _ any) bool {
		var s = m.(*Service)
		if _, ok := ready[s.cfg.ID]; !ok {
			ready[s.cfg.ID] = 1
		}
		if s.Ready() != nil {
			ready[s.cfg.ID] = 0
		}
		s.ks.Mu.RLock()
		for id, sh := range s.shards {
			var status = sh.Assignment().Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus)
			seen[key{id.String(), status.Code.String()}] = true
		}
		s.ks.Mu.RUnlock()
		return true
	})
	for k := range seen {
		ch <- prometheus.MustNewConstMetric(shardUpDesc, prometheus.GaugeValue, 1, k.shard, k.status)
	}
	for id, v := range ready {
		ch <- prometheus.MustNewConstMetric(memberReadyDesc, prometheus.GaugeValue, v, id)
	}
}

// initMetrics creates the counters of shard id that count failures and
// skips at zero, so that rules see them before a first one (increase() of
// a series that is born at 1 is 0).
func initMetrics(id pc.ShardID) {
	skippedTotal.WithLabelValues(id.String())
	failuresTotal.WithLabelValues(id.String())
	commitFailuresTotal.WithLabelValues(id.String())
}

// recordFailure counts a failure of a replica of shard id, and a commit
// failure if err is one.
func recordFailure(id pc.ShardID, err error) {
	failuresTotal.WithLabelValues(id.String()).Inc()
	var ce *txn.CommitError
	if errors.As(err, &ce) {
		commitFailuresTotal.WithLabelValues(id.String()).Inc()
	}
}

// recordMetrics records a committed transaction of shard id, whose fully
// qualified name is fqn, begun notRunning after its predecessor's commit
// started (zero for the first transaction of a primary).
func recordMetrics(id pc.ShardID, fqn string, notRunning time.Duration, st txn.Stats) {
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
	phaseSeconds.WithLabelValues(shard, "consume").Add(st.Consume.Seconds())
	phaseSeconds.WithLabelValues(shard, "stalled").Add(st.Stalled.Seconds())
	phaseSeconds.WithLabelValues(shard, "finalize").Add(st.Finalize.Seconds())
	phaseSeconds.WithLabelValues(shard, "commit").Add(st.Commit.Seconds())
	phaseSeconds.WithLabelValues(shard, "ack").Add(st.Ack.Seconds())
	for journal, src := range st.Checkpoint.Sources {
		readThroughOffset.WithLabelValues(shard, journal.String()).Set(float64(src.ReadThrough))
	}
}

// forgetReads removes the gauges of a primary's reads of shard id, whose
// fully qualified name is fqn.
func forgetReads(id pc.ShardID, fqn string) {
	gazetteReadHead.DeletePartialMatch(prometheus.Labels{"shard": fqn})
	readThroughOffset.DeletePartialMatch(prometheus.Labels{"shard": id.String()})
	readLagBytes.DeletePartialMatch(prometheus.Labels{"shard": id.String()})
}

// forgetRecovery removes the gauges of the recovery of shard id.
func forgetRecovery(id pc.ShardID) {
	recoveryPlayedBytes.DeleteLabelValues(id.String())
	recoveryRemainingBytes.DeleteLabelValues(id.String())
}

// lagReporter sets the read lag gauge of a source of a shard as it changes,
// at most every lagReportInterval unless the lag drops to zero. The write
// head, which the lag is measured from, is learned with each read response:
// within one, the lag changes only as messages are read, and the clock is
// read (for the interval) only on the first message of a response, or as
// the lag reaches zero.
type lagReporter struct {
	shard, journal string
	last           int64
	response       pb.Offset // Offset of the read response of the last check.
	at             time.Time
}

const lagReportInterval = 100 * time.Millisecond

// report reports the lag of a message read from the response whose content
// begins at offset response.
func (r *lagReporter) report(lag int64, response pb.Offset) {
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

// recoveryProgress follows the playback of a recovery log, and sets the
// shard's recovery gauges: bytes played, from the player, and bytes still to
// play, to the write head that the log's read responses report.
type recoveryProgress struct {
	shard string
	head  atomic.Int64 // Write head, as last reported.
}

func newRecoveryProgress(id pc.ShardID) *recoveryProgress {
	return &recoveryProgress{shard: id.String()}
}

// follow sets the gauges from player until done closes.
func (p *recoveryProgress) follow(player *recoverylog.Player, done <-chan struct{}) {
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

// journalClient returns a client of jc whose reads of journal tell p of the
// write head.
func (p *recoveryProgress) journalClient(jc pb.RoutedJournalClient, journal pb.Journal) pb.RoutedJournalClient {
	return progressClient{RoutedJournalClient: jc, journal: journal, p: p}
}

type progressClient struct {
	pb.RoutedJournalClient
	journal pb.Journal
	p       *recoveryProgress
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
	p *recoveryProgress
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

func (p *recoveryProgress) observe(resp *pb.ReadResponse) {
	if resp.Status == pb.Status_OK && resp.WriteHead > p.head.Load() {
		p.head.Store(resp.WriteHead)
	}
}
