// Package workload defines what the benchmark's consumers and recovery
// commands do, shared by our side and the anchor's (which cannot link into
// one binary): the journals and shards of the throughput workload, the logs
// of the recovery measure (whose state is that of package benchstate), and
// the results the commands report to the driver.
package workload

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// Journals of the throughput workload.
const (
	// InputPrefix is the prefix of the input partitions.
	InputPrefix = "bench/input/"
	// MessageType labels the input partitions: gazconsumer.bench.v1.Add, whose wire
	// encoding anchorpb.Add shares.
	MessageType = "gazconsumer.bench.v1.Add"
	// ContentType of the input partitions: Gazette's protobuf fixed framing.
	ContentType = "application/x-protobuf-fixed"
	// RecoveryPrefix is the prefix of the shards' recovery logs.
	RecoveryPrefix = "bench/recovery/"
	// StatePrefix is the prefix of the logs of the recovery measure.
	StatePrefix = "bench/state/"
	// AnchorSumsPath is where the anchor serves the sums of a shard
	// (?shard=ID) over HTTP, as a JSON object from each key to its sum: for
	// the driver to check them. Ours serves them through its queries
	// service, SummerQueries.ListSums.
	AnchorSumsPath = "/bench/sums"
)

// Input is input partition i.
func Input(i int) pb.Journal { return pb.Journal(fmt.Sprintf("%spart-%02d", InputPrefix, i)) }

// ShardID is the ID of the shard of partition i.
func ShardID(i int) pc.ShardID { return pc.ShardID(fmt.Sprintf("shard-%02d", i)) }

// Run names one consumer run: its side ("ours" or "anchor"), what it
// measures if not throughput, and repetition.
type Run struct {
	Side string
	// Tag names what the run measures, if there are several runs of a side
	// in a repetition (e.g. r50 for a latency run at 50% of a rate).
	Tag string
	Rep int
	// MinOffsets are the offsets of the partitions where the shards begin
	// to read, if not at 0 (those of a live load's start).
	MinOffsets []int64
	// MinTxn and MaxTxn bound the durations of the shards' transactions;
	// a zero MaxTxn means a second.
	MinTxn, MaxTxn time.Duration
}

func (r Run) String() string {
	if r.Tag != "" {
		return fmt.Sprintf("%s-%s-%d", r.Side, r.Tag, r.Rep)
	}
	return fmt.Sprintf("%s-%d", r.Side, r.Rep)
}

// EtcdPrefix of the run's consumer group.
func (r Run) EtcdPrefix() string { return "/gazette/consumers/bench-" + r.String() }

// ShardSpec is the spec of the run's shard of partition i: both sides run
// the same, with no standby, transactions bounded by MinTxn and MaxTxn,
// reading from MinOffsets, and the run's own recovery logs and hints.
func (r Run) ShardSpec(i int) *pc.ShardSpec {
	var src = pc.ShardSpec_Source{Journal: Input(i)}
	if i < len(r.MinOffsets) {
		src.MinOffset = r.MinOffsets[i]
	}
	return &pc.ShardSpec{
		Id:                ShardID(i),
		Sources:           []pc.ShardSpec_Source{src},
		RecoveryLogPrefix: RecoveryPrefix + r.String(),
		HintPrefix:        "/gazette/hints/bench-" + r.String(),
		HintBackups:       1,
		MinTxnDuration:    r.MinTxn,
		MaxTxnDuration:    cmp.Or(r.MaxTxn, time.Second),
	}
}

// JournalsYAML returns the specs of the benchmark's journals, in the format
// of `gazctl journals apply`: partitions input partitions, the recovery logs
// of the shards of runs, and the logs of the recovery measure of each side.
func JournalsYAML(partitions int, runs []Run, sides []string) string {
	// Children are in name order, as journal hierarchies need.
	runs = slices.SortedFunc(slices.Values(runs), func(a, b Run) int { return strings.Compare(a.String(), b.String()) })
	sides = slices.Sorted(slices.Values(sides))
	var b strings.Builder
	b.WriteString(`name: bench/
replication: 1
fragment:
  length: 67108864
  stores: [file:///]
  refresh_interval: 10s
  compression_codec: NONE
children:
  - name: bench/input/
    labels:
      - {name: app.gazette.dev/message-type, value: ` + MessageType + `}
      - {name: content-type, value: ` + ContentType + `}
    children:
`)
	for i := range partitions {
		fmt.Fprintf(&b, "      - name: %s\n", Input(i))
	}
	if len(runs) != 0 { // A hierarchy has children.
		b.WriteString(`  - name: bench/recovery/
    labels:
      - {name: content-type, value: application/x-gazette-recoverylog}
    children:
`)
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "      - name: %s%s/\n        children:\n", RecoveryPrefix, r)
		for i := range partitions {
			fmt.Fprintf(&b, "          - name: %s/%s\n", r.ShardSpec(i).RecoveryLogPrefix, ShardID(i))
		}
	}
	b.WriteString(`  - name: bench/state/
    labels:
      - {name: content-type, value: application/x-gazette-recoverylog}
    children:
`)
	for _, s := range sides {
		fmt.Fprintf(&b, "      - name: %s\n", StateLog(s))
	}
	return b.String()
}

// StateLog is the log of side's recovery measure.
func StateLog(side string) pb.Journal { return pb.Journal(StatePrefix + side) }

// Built is what a recovery command's build reports.
type Built struct {
	// Seconds taken to write the state.
	Seconds float64 `json:"seconds"`
	// LogBytes is the recovery log's size.
	LogBytes int64 `json:"log_bytes"`
	// LiveBytes is the size of the store's live files, per the hints.
	LiveBytes int64 `json:"live_bytes"`
}

// Played is what a recovery command's playback reports.
type Played struct {
	// Seconds of playback, from starting to read the log to having the
	// store's files in place.
	Seconds float64 `json:"seconds"`
	// SyncSeconds to fsync the played files and their directories after
	// (durable.SyncTree): neither player fsyncs, so Seconds is the
	// playback's time into the page cache, and Seconds+SyncSeconds its
	// time to durable files.
	SyncSeconds float64 `json:"sync_seconds"`
	// OpenSeconds to open the played store.
	OpenSeconds float64 `json:"open_seconds"`
	// BytesRead from the log by playback; -1 if the player doesn't say.
	BytesRead int64 `json:"bytes_read"`
	// Checked is whether the recovered keys and values were checked.
	Checked bool `json:"checked"`
}

// Report writes v as a JSON line to w, for the driver.
func Report(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// RecoveryLogsYAML returns the specs of the recovery logs of the shards of
// runs alone, as JournalsYAML has them: to apply more runs' logs than etcd
// takes in one transaction.
func RecoveryLogsYAML(partitions int, runs []Run) string {
	runs = slices.SortedFunc(slices.Values(runs), func(a, b Run) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	b.WriteString(`name: bench/recovery/
replication: 1
fragment:
  length: 67108864
  stores: [file:///]
  refresh_interval: 10s
  compression_codec: NONE
labels:
  - {name: content-type, value: application/x-gazette-recoverylog}
children:
`)
	for _, r := range runs {
		fmt.Fprintf(&b, "  - name: %s%s/\n    children:\n", RecoveryPrefix, r)
		for i := range partitions {
			fmt.Fprintf(&b, "      - name: %s/%s\n", r.ShardSpec(i).RecoveryLogPrefix, ShardID(i))
		}
	}
	return b.String()
}
