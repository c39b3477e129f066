package txn

import (
	"fmt"
	"math"
	"strconv"

	pc "go.gazette.dev/core/consumer/protocol"
)

// LabelMaxTxnBytes is the shard label bounding what one of its transactions
// writes, in bytes of keys and values (Limits.MaxBytes): "0" sets no bound.
// It applies to a running shard from its next transaction on.
const LabelMaxTxnBytes = "gazconsumer.dev/max-txn-bytes"

// DefaultMaxTxnBytes is the bound of a shard without LabelMaxTxnBytes. A
// transaction under a steady stream writes far less; one reading a backlog
// reaches it, and its commit, which a new shard forking from it waits for,
// then takes a fraction of a second: of rows of about 90 bytes, 8 MiB are
// about 92,000, which a member sharing two processors with its brokers
// wrote to RocksDB in 0.3 to 0.8 s (bench/cmd/rescalebench).
const DefaultMaxTxnBytes = 8 << 20

// MaxTxnBytesOf returns the bound that spec's labels set on what one of its
// transactions writes: 0 if none.
func MaxTxnBytesOf(spec *pc.ShardSpec) (int, error) {
	var v = spec.LabelSet.ValueOf(LabelMaxTxnBytes)
	if v == "" {
		return DefaultMaxTxnBytes, nil
	}
	var n, err = strconv.ParseUint(v, 10, 63)
	if err != nil || n > math.MaxInt {
		return 0, fmt.Errorf("shard %s: label %s is %q, not a number of bytes (0 for no bound)", spec.Id, LabelMaxTxnBytes, v)
	}
	return int(n), nil
}
