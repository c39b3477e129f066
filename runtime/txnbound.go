package runtime

import (
	"fmt"
	"math"
	"strconv"

	pc "go.gazette.dev/core/consumer/protocol"
)

// LabelMaxTxnWrites is the shard label bounding how many keys one of its
// transactions writes (TxnBound's Writes): "0" sets no bound. It
// applies to a running shard from its next transaction on.
const LabelMaxTxnWrites = "gazconsumer.dev/max-txn-writes"

// LabelMaxTxnBytes is the shard label bounding the bytes of keys and values
// one of its transactions writes (TxnBound's Bytes): "0" sets no
// bound. It applies to a running shard from its next transaction on.
const LabelMaxTxnBytes = "gazconsumer.dev/max-txn-bytes"

// DefaultMaxTxnWrites is the bound of a shard without LabelMaxTxnWrites. A
// transaction under a steady stream writes far fewer; one reading a
// backlog reaches it, and its commit, which a new shard forking from it
// waits for (with the commit of the transaction open as the split is
// asked, of as many), then takes a fraction of a second: a member sharing
// two processors with its brokers wrote 92,000 rows of about 90 bytes to
// RocksDB in 0.3 to 0.8 s, and new shards served 1.1 to 1.4 s after the
// rescale command under a bound of 100,000 keys, 0.5 to 0.9 s under this
// one (bench/cmd/rescalebench). A commit's time grows with its keys more
// than with their bytes: a bound of 8 MiB, the same there, took a third of
// the throughput of rows of 1 KiB (bench/cmd/bench, workload wide), where
// this bound, as 100,000 did, leaves throughput as it was.
const DefaultMaxTxnWrites = 50_000

// DefaultMaxTxnBytes is the bound of a shard without LabelMaxTxnBytes: it
// bounds the memory of a transaction of large values, past what
// DefaultMaxTxnWrites bounds of small ones.
const DefaultMaxTxnBytes = 256 << 20

// MaxTxnOf returns the bound that spec's labels set on what one of its
// transactions writes.
func MaxTxnOf(spec *pc.ShardSpec) (TxnBound, error) {
	var b TxnBound
	var err error
	if b.Writes, err = countLabel(spec, LabelMaxTxnWrites, DefaultMaxTxnWrites, "a number of keys"); err != nil {
		return b, err
	}
	b.Bytes, err = countLabel(spec, LabelMaxTxnBytes, DefaultMaxTxnBytes, "a number of bytes")
	return b, err
}

// countLabel returns the count of spec's label, or def if it has none.
func countLabel(spec *pc.ShardSpec, label string, def int, what string) (int, error) {
	var v = spec.LabelSet.ValueOf(label)
	if v == "" {
		return def, nil
	}
	var n, err = strconv.ParseUint(v, 10, 63)
	if err != nil || n > math.MaxInt {
		return 0, fmt.Errorf("shard %s: label %s is %q, not %s (0 for no bound)", spec.Id, label, v, what)
	}
	return int(n), nil
}
