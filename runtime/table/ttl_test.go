package table_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime/due"
	"github.com/gazconsumer/gazconsumer/runtime/table"
)

// timedKV is a memKV of a transaction at a time.
type timedKV struct {
	memKV
	now time.Time
}

func (kv *timedKV) Now() time.Time { return kv.now }

// expiring is a table of FileDescriptorProtos keyed by name, whose rows live
// an hour after their last write.
var expiring = table.NewSchema(table.Def[string, *descriptorpb.FileDescriptorProto]{
	Name:   "names",
	Key:    []string{"name"},
	KeyOf:  func(r *descriptorpb.FileDescriptorProto) string { return r.GetName() },
	Fields: func(k *string, c *table.Codec) { table.String(c, k, keyenc.Ascending) },
	TTL:    time.Hour,
})

// dueEntries returns the entries of the index of kv, as "kind subject@time".
func dueEntries(t *testing.T, kv memKV, epoch time.Time) []string {
	var out []string
	_ = kv.Scan([]byte(due.Prefix), due.End(), func(k, _ []byte) bool {
		var at, kind, subject, err = due.ParseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		var row, _ = expiring.Row(subject, kv[string(subject)])
		out = append(out, kind.String()+" "+row.GetName()+"@"+at.Sub(epoch).String())
		return true
	})
	return out
}

// A row of a table with a TTL is in the index of what falls due at its
// last write's time and the TTL; a write moves it there, a delete takes it
// out; its expiry record tells when it is due.
func TestTTLIndex(t *testing.T) {
	var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var kv = &timedKV{memKV: memKV{}, now: epoch}
	var tbl = expiring.Open(kv)
	if expiring.TTL() != time.Hour {
		t.Errorf("TTL = %v", expiring.TTL())
	}
	var put = func(name string) {
		if err := tbl.Put(&descriptorpb.FileDescriptorProto{Name: &name}); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	put("b")
	put("a") // Again, at the same time: one entry.
	var check = func(when string, want ...string) {
		t.Helper()
		if got := dueEntries(t, kv.memKV, epoch); strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: due %q, want %q", when, got, want)
		}
	}
	check("written", "expiry a@1h0m0s", "expiry b@1h0m0s")
	kv.now = epoch.Add(30 * time.Minute)
	put("a")
	check("a written again", "expiry b@1h0m0s", "expiry a@1h30m0s")
	if err := tbl.Delete("b"); err != nil {
		t.Fatal(err)
	}
	check("b deleted", "expiry a@1h30m0s")
	if v, ok := kv.memKV[string(due.AppendExpiryKey(nil, expiring.AppendKey(nil, "a", 1)))]; !ok {
		t.Error("a has no expiry record")
	} else if at, err := due.ParseTime(v); err != nil || !at.Equal(epoch.Add(90*time.Minute)) {
		t.Errorf("a's expiry record says %v, %v", at, err)
	}
	if err := tbl.Delete("c"); err != nil { // Never written.
		t.Fatal(err)
	}
	// The table's own scans see its rows alone.
	var n int
	_ = tbl.Scan(func(*descriptorpb.FileDescriptorProto) bool { n++; return true })
	if n != 1 {
		t.Errorf("scanned %d rows, want 1", n)
	}
	// A KV which tells no time can't date a write.
	var untimed = expiring.Open(memKV{})
	if err := untimed.Put(&descriptorpb.FileDescriptorProto{Name: new(string)}); err == nil || !strings.Contains(err.Error(), "tells no time") {
		t.Errorf("Put without a time: %v", err)
	}
}
