package txn

import (
	"strings"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func TestMaxTxnBytesOf(t *testing.T) {
	for _, tc := range []struct {
		label string // "" for none.
		want  int
		err   string
	}{
		{"", DefaultMaxTxnBytes, ""},
		{"0", 0, ""},
		{"1048576", 1 << 20, ""},
		{"-1", 0, `label gazconsumer.dev/max-txn-bytes is "-1", not a number of bytes`},
		{"16MiB", 0, `shard a/shard: label gazconsumer.dev/max-txn-bytes is "16MiB"`},
		{"99999999999999999999", 0, "not a number of bytes"},
	} {
		var spec = &pc.ShardSpec{Id: "a/shard"}
		if tc.label != "" {
			spec.LabelSet = pb.MustLabelSet(LabelMaxTxnBytes, tc.label)
		}
		var got, err = MaxTxnBytesOf(spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("label %q: got %d, %v; want an error with %q", tc.label, got, err, tc.err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("label %q: got %d, %v; want %d", tc.label, got, err, tc.want)
		}
	}
}
