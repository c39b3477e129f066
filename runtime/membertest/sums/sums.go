// Package sums is a consumer application whose effects a test can check
// for exactly-once delivery, and the journals and cluster of members
// (a membertest.Cluster) that run it: for tests and benchmarks of the
// runtime (those of runtime/service and runtime/runconsumer, and the bench
// module's servicebench), not for applications. Each Cluster has a name,
// under which its journals and etcd keys live, so that clusters share a
// stack.
//
// The application keeps a sum per key in a RocksDB store recorded into each
// shard's recovery log, and publishes each addition onward to an output
// journal, so that a test can check both the state and the published
// messages for exactly-once effects: the sums must equal those of the
// messages published to the inputs, and the output read read-committed must
// hold each addition once.
package sums

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
)

// ContentType of the application's journals.
const ContentType = labels.ContentType_JSONLines

// Add adds Value to the sum of Key. Pad, if set, is stored under a key of
// its own, to grow the shard's state.
type Add struct {
	UUID  message.UUID
	Key   string
	Value int64
	Pad   []byte `json:",omitempty"`
}

// GetUUID returns the message's UUID.
func (m *Add) GetUUID() message.UUID { return m.UUID }

// SetUUID sets the message's UUID.
func (m *Add) SetUUID(u message.UUID) { m.UUID = u }

// NewAcknowledgement returns an empty Add to carry an acknowledgement.
func (m *Add) NewAcknowledgement(pb.Journal) message.Message { return new(Add) }

// App keeps a sum per key in a RocksDB store recorded into the shard's
// recovery log, and publishes each Add it consumes to Output.
type App struct {
	Output pb.Journal
}

var _ runtime.Application = App{}

// NewStore opens the shard's RocksDB store, which needs a recovery log,
// within the member's memory budget, as generated applications' are.
func (App) NewStore(shard runtime.Shard, rec runtime.Recorder) (runtime.Store, error) {
	if _, ok := rec.(rocks.FileRecorder); !ok {
		return nil, fmt.Errorf("the sums store needs a recovery log")
	}
	return rocks.Opener{}.OpenStore(shard, rec)
}

// NewMessage returns an Add, whatever the journal.
func (App) NewMessage(*pb.JournalSpec) (message.Message, error) { return new(Add), nil }

// ConsumeMessage adds the message to its key's sum, stores its Pad, and
// publishes the addition onward.
func (a App) ConsumeMessage(_ runtime.Shard, st runtime.Store, env message.Envelope, pub *message.Publisher) error {
	var m = env.Message.(*Add)
	var kv = st.(runtime.KVStore).KV()
	var v, _, err = kv.Get([]byte(m.Key))
	if err != nil {
		return err
	}
	var sum int64
	if len(v) == 8 {
		sum = int64(binary.BigEndian.Uint64(v))
	}
	if err = kv.Put([]byte(m.Key), binary.BigEndian.AppendUint64(nil, uint64(sum+m.Value))); err != nil {
		return err
	}
	if len(m.Pad) != 0 {
		if err = kv.Put([]byte("pad/"+m.UUID.String()), m.Pad); err != nil {
			return err
		}
	}
	_, err = pub.PublishUncommitted(func(message.Mappable) (pb.Journal, string, error) {
		return a.Output, ContentType, nil
	}, &Add{Key: m.Key, Value: m.Value})
	return err
}

// ShardDefaults complete the specs applied without transaction durations.
func (App) ShardDefaults() pc.ShardSpec {
	return pc.ShardSpec{MinTxnDuration: 2 * time.Millisecond, MaxTxnDuration: 50 * time.Millisecond}
}

// FinalizeTxn has nothing to do: the sums are written as they change.
func (App) FinalizeTxn(runtime.Shard, runtime.Store, *message.Publisher) error { return nil }

// ShardID is the ID of shard i.
func ShardID(i int) pc.ShardID { return pc.ShardID(fmt.Sprintf("shard-%d", i)) }

// Input is the source journal of shard i.
func (c *Cluster) Input(i int) pb.Journal {
	return pb.Journal(fmt.Sprintf("%s/input/part-%d", c.Name, i))
}

// Output is the journal the application publishes to.
func (c *Cluster) Output() pb.Journal { return pb.Journal(c.Name + "/output") }

// DeadLetters is a journal for shards to record undecodable messages into.
func (c *Cluster) DeadLetters() pb.Journal { return pb.Journal(c.Name + "/dead-letters") }

// ShardSpec is the spec of shard i, which reads Input(i) and has one hot
// standby.
func (c *Cluster) ShardSpec(i int) *pc.ShardSpec {
	return &pc.ShardSpec{
		Id:                ShardID(i),
		Sources:           []pc.ShardSpec_Source{{Journal: c.Input(i)}},
		RecoveryLogPrefix: c.Name + "/recovery",
		HintPrefix:        "/gazette/hints/" + c.Name,
		HintBackups:       2,
		MinTxnDuration:    time.Millisecond,
		MaxTxnDuration:    100 * time.Millisecond,
		HotStandbys:       1,
	}
}

// journals returns the YAML of the cluster's journals: the inputs and
// recovery logs of its shards, the output and the dead-letter journal,
// with fragments of fragmentLength bytes.
func (c *Cluster) journals(fragmentLength int64) string {
	var b strings.Builder
	// Children are in name order, as journal hierarchies need.
	fmt.Fprintf(&b, `name: %s/
replication: 1
fragment:
  length: %d
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: %s
    labels:
      - name: content-type
        value: %s
  - name: %s/input/
    labels:
      - name: content-type
        value: %s
    children:
`, c.Name, fragmentLength, c.DeadLetters(), ContentType, c.Name, ContentType)
	for i := range c.Shards {
		fmt.Fprintf(&b, "      - name: %s\n", c.Input(i))
	}
	fmt.Fprintf(&b, `  - name: %s
    labels:
      - name: content-type
        value: %s
  - name: %s/recovery/
    labels:
      - name: content-type
        value: application/x-gazette-recoverylog
    children:
`, c.Output(), ContentType, c.Name)
	for i := range c.Shards {
		fmt.Fprintf(&b, "      - name: %s\n", c.ShardSpec(i).RecoveryLog())
	}
	return b.String()
}
