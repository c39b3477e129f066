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

// holds are timers of FileDescriptorProtos keyed by name.
var holds = table.NewSchema(table.Def[string, *descriptorpb.FileDescriptorProto]{
	Name:   "timer:holds",
	Key:    []string{"name"},
	KeyOf:  func(r *descriptorpb.FileDescriptorProto) string { return r.GetName() },
	Fields: func(k *string, c *table.Codec) { table.String(c, k, keyenc.Ascending) },
})

// A timer of a key is set, reset (set again, in place of the first) and
// cancelled; the index of what falls due holds one entry of each timer set,
// at its time.
func TestTimers(t *testing.T) {
	var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var kv = &timedKV{memKV: memKV{}, now: epoch}
	var ts = holds.OpenTimers(kv)
	var file = func(name, pkg string) *descriptorpb.FileDescriptorProto {
		return &descriptorpb.FileDescriptorProto{Name: &name, Package: &pkg}
	}
	var entries = func() string {
		var out []string
		_ = kv.Scan([]byte(due.Prefix), due.End(), func(k, _ []byte) bool {
			var at, kind, subject, err = due.ParseKey(k)
			if err != nil {
				t.Fatal(err)
			}
			var row, _ = holds.Row(subject, kv.memKV[string(subject)])
			out = append(out, kind.String()+" "+row.GetName()+"@"+at.Sub(epoch).String())
			return true
		})
		return strings.Join(out, ", ")
	}
	if err := ts.Set(file("a", "first"), epoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := ts.SetAfter(file("b", "b"), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := ts.Set(file("a", "second"), epoch.Add(3*time.Hour)); err != nil { // A reset.
		t.Fatal(err)
	}
	if got, want := entries(), "timer b@2h0m0s, timer a@3h0m0s"; got != want {
		t.Errorf("due %q, want %q", got, want)
	}
	if msg, at, ok, err := ts.Get("a"); err != nil || !ok || msg.GetPackage() != "second" || !at.Equal(epoch.Add(3*time.Hour)) {
		t.Errorf("Get(a) = %v, %v, %v, %v", msg, at, ok, err)
	}
	if was, err := ts.Cancel("b"); err != nil || !was {
		t.Errorf("Cancel(b) = %v, %v", was, err)
	}
	if was, err := ts.Cancel("b"); err != nil || was {
		t.Errorf("Cancel(b) again = %v, %v", was, err)
	}
	if _, _, ok, err := ts.Get("b"); err != nil || ok {
		t.Errorf("Get(b) after Cancel = %v, %v", ok, err)
	}
	if got, want := entries(), "timer a@3h0m0s"; got != want {
		t.Errorf("due %q, want %q", got, want)
	}
	if ts.Schema() != holds {
		t.Error("Schema is not the timers'")
	}
	if err := holds.OpenTimers(memKV{}).SetAfter(file("c", ""), time.Hour); err == nil || !strings.Contains(err.Error(), "tells no time") {
		t.Errorf("SetAfter without a time: %v", err)
	}
}
