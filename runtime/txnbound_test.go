package runtime_test

import (
	"strings"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/runtime"
)

func TestMaxTxnOf(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   runtime.TxnBound
		err    string
	}{
		{nil, runtime.TxnBound{Bytes: runtime.DefaultMaxTxnBytes, Writes: runtime.DefaultMaxTxnWrites}, ""},
		{[]string{runtime.LabelMaxTxnBytes, "0"}, runtime.TxnBound{Writes: runtime.DefaultMaxTxnWrites}, ""},
		{[]string{runtime.LabelMaxTxnWrites, "0", runtime.LabelMaxTxnBytes, "0"}, runtime.TxnBound{}, ""},
		{[]string{runtime.LabelMaxTxnBytes, "1048576", runtime.LabelMaxTxnWrites, "5000"}, runtime.TxnBound{Bytes: 1 << 20, Writes: 5000}, ""},
		{[]string{runtime.LabelMaxTxnBytes, "-1"}, runtime.TxnBound{}, `label gazconsumer.dev/max-txn-bytes is "-1", not a number of bytes`},
		{[]string{runtime.LabelMaxTxnBytes, "16MiB"}, runtime.TxnBound{}, `shard a/shard: label gazconsumer.dev/max-txn-bytes is "16MiB"`},
		{[]string{runtime.LabelMaxTxnWrites, "1e5"}, runtime.TxnBound{}, `shard a/shard: label gazconsumer.dev/max-txn-writes is "1e5", not a number of keys`},
		{[]string{runtime.LabelMaxTxnWrites, "99999999999999999999"}, runtime.TxnBound{}, "not a number of keys"},
	} {
		var spec = &pc.ShardSpec{Id: "a/shard"}
		if tc.labels != nil {
			spec.LabelSet = pb.MustLabelSet(tc.labels...)
		}
		var got, err = runtime.MaxTxnOf(spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("labels %q: got %+v, %v; want an error with %q", tc.labels, got, err, tc.err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("labels %q: got %+v, %v; want %+v", tc.labels, got, err, tc.want)
		}
	}
}

// TxnBound.Reached: in bytes, in keys, either, or never.
func TestTxnBoundReached(t *testing.T) {
	var at = func(bytes, writes int) sizeAt { return sizeAt{bytes, writes} }
	for _, tc := range []struct {
		b    runtime.TxnBound
		s    sizeAt
		want bool
	}{
		{runtime.TxnBound{}, at(1<<30, 1<<30), false},
		{runtime.TxnBound{Bytes: 100}, at(99, 1<<30), false},
		{runtime.TxnBound{Bytes: 100}, at(100, 0), true},
		{runtime.TxnBound{Writes: 10}, at(1<<30, 9), false},
		{runtime.TxnBound{Writes: 10}, at(0, 10), true},
		{runtime.TxnBound{Bytes: 100, Writes: 10}, at(99, 9), false},
		{runtime.TxnBound{Bytes: 100, Writes: 10}, at(100, 1), true},
		{runtime.TxnBound{Bytes: 100, Writes: 10}, at(1, 10), true},
	} {
		if got := tc.b.Reached(tc.s); got != tc.want {
			t.Errorf("%+v reached at %+v: %v, want %v", tc.b, tc.s, got, tc.want)
		}
	}
	if (runtime.TxnBound{Bytes: 1}).Reached(nil) {
		t.Error("reached by a store that is no TxnSizer")
	}
}

type sizeAt struct{ bytes, writes int }

func (s sizeAt) TxnSize() (int, int) { return s.bytes, s.writes }
