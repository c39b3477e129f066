// Package workload defines what the benchmark's consumers and recovery
// commands do, shared by our side and the anchor's (which cannot link into
// one binary): the journals and shards of the throughput workload, and the
// keys, values and transactions that build a shard's state for the recovery
// measure, and the results the commands report to the driver.
package workload

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
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
	// MessageType labels the input partitions: bench.v1.Add, whose wire
	// encoding anchorpb.Add shares.
	MessageType = "bench.v1.Add"
	// ContentType of the input partitions: Gazette's protobuf fixed framing.
	ContentType = "application/x-protobuf-fixed"
	// RecoveryPrefix is the prefix of the shards' recovery logs.
	RecoveryPrefix = "bench/recovery/"
	// StatePrefix is the prefix of the logs of the recovery measure.
	StatePrefix = "bench/state/"
)

// Input is input partition i.
func Input(i int) pb.Journal { return pb.Journal(fmt.Sprintf("%spart-%02d", InputPrefix, i)) }

// ShardID is the ID of the shard of partition i.
func ShardID(i int) pc.ShardID { return pc.ShardID(fmt.Sprintf("shard-%02d", i)) }

// Run names one consumer run: its side ("ours" or "anchor") and repetition.
type Run struct {
	Side string
	Rep  int
	// MinTxn and MaxTxn bound the durations of the shards' transactions;
	// a zero MaxTxn means a second.
	MinTxn, MaxTxn time.Duration
}

func (r Run) String() string { return fmt.Sprintf("%s-%d", r.Side, r.Rep) }

// EtcdPrefix of the run's consumer group.
func (r Run) EtcdPrefix() string { return "/gazette/consumers/bench-" + r.String() }

// ShardSpec is the spec of the run's shard of partition i: both sides run
// the same, with no standby, transactions bounded by MinTxn and MaxTxn, and the
// run's own recovery logs and hints.
func (r Run) ShardSpec(i int) *pc.ShardSpec {
	return &pc.ShardSpec{
		Id:                ShardID(i),
		Sources:           []pc.ShardSpec_Source{{Journal: Input(i)}},
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
	b.WriteString(`  - name: bench/recovery/
    labels:
      - {name: content-type, value: application/x-gazette-recoverylog}
    children:
`)
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

// State describes the state built for the recovery measure, as
// internal/recoverybench builds it: Keys distinct keys with values of
// ValueLen incompressible bytes, Put in a random order, then a fraction
// Rewrites of them Put again, in transactions of TxnLen Puts.
type State struct {
	Keys     int
	ValueLen int
	TxnLen   int
	Rewrites float64
}

// Key appends the key of i to b[:0].
func Key(b []byte, i int) []byte {
	return binary.BigEndian.AppendUint64(append(b[:0], 'k'), uint64(i))
}

// Value appends to b[:0] the value of key i: its index, then pseudo-random
// bytes seeded by it, which don't compress.
func Value(b []byte, i, n int) []byte {
	b = binary.BigEndian.AppendUint64(b[:0], uint64(i))
	var rng = rand.NewChaCha8([32]byte{0: byte(i), 1: byte(i >> 8), 2: byte(i >> 16), 3: byte(i >> 24)})
	for len(b) < n {
		b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
	}
	return b[:n]
}

// Order returns the keys to Put, in order.
func (s State) Order() []int {
	var order = rand.New(rand.NewPCG(7, 11)).Perm(s.Keys)
	for i := range int(float64(s.Keys) * s.Rewrites) {
		order = append(order, order[i*7919%s.Keys])
	}
	return order
}

// Checker checks the keys and values of a recovered store, given in key
// order.
type Checker struct {
	s            State
	n            int
	wantK, wantV []byte
	err          error
}

// NewChecker returns a Checker of a store holding s.
func (s State) NewChecker() *Checker { return &Checker{s: s} }

// Next checks the next key and value, and returns whether they are right.
// It suits the callbacks of scans.
func (c *Checker) Next(key, value []byte) bool {
	c.wantK, c.wantV = Key(c.wantK, c.n), Value(c.wantV, c.n, c.s.ValueLen)
	if string(key) != string(c.wantK) || string(value) != string(c.wantV) {
		c.err = fmt.Errorf("recovered key %x (value of %d bytes) is not key #%d %x, or has another value", key, len(value), c.n, c.wantK)
		return false
	}
	c.n++
	return true
}

// Err returns the first wrong key or value, or whether keys are missing.
func (c *Checker) Err() error {
	if c.err == nil && c.n != c.s.Keys {
		c.err = fmt.Errorf("recovered %d keys, want %d", c.n, c.s.Keys)
	}
	return c.err
}

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
	// OpenSeconds to open the played store.
	OpenSeconds float64 `json:"open_seconds"`
	// BytesRead from the log by playback; -1 if the player doesn't say.
	BytesRead int64 `json:"bytes_read"`
	// Checked is whether the recovered keys and values were checked.
	Checked bool `json:"checked"`
}

// Report writes v as a JSON line to w, for the driver.
func Report(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
