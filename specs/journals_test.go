package specs_test

import (
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/specs"
)

const valid = `
name: orders/
replication: 1
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: orders/part-000
  - name: orders/part-001
    replication: 2
  - name: orders/part-002
    delete: true
    revision: -1
`

func TestParseJournalsFlattensHierarchy(t *testing.T) {
	var req, err = specs.ParseJournals("orders.yaml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Changes) != 3 {
		t.Fatalf("got %d changes, want 3", len(req.Changes))
	}
	if u := req.Changes[0].Upsert; u == nil || u.Name != "orders/part-000" || u.Replication != 1 || u.Fragment.Length != 1<<20 {
		t.Fatalf("change 0 = %+v", req.Changes[0])
	}
	if u := req.Changes[1].Upsert; u == nil || u.Name != "orders/part-001" || u.Replication != 2 {
		t.Fatalf("change 1 = %+v", req.Changes[1])
	}
	if req.Changes[2].Delete != "orders/part-002" {
		t.Fatalf("change 2 = %+v", req.Changes[2])
	}
}

func TestParseJournalsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // Every fragment must appear in the error.
	}{
		{
			name: "invalid field value names the file, journal and field",
			yaml: strings.Replace(valid, "length: 1048576", "length: 12", 1),
			want: []string{"bad.yaml", `journal "orders/part-000"`, "Fragment", "Length"},
		},
		{
			name: "invalid replication",
			yaml: strings.Replace(valid, "replication: 2", "replication: 99", 1),
			want: []string{"bad.yaml", `journal "orders/part-001"`, "Replication"},
		},
		{
			name: "unknown field names the file, line and field",
			yaml: strings.Replace(valid, "replication: 1", "replicaton: 1", 1),
			want: []string{"bad.yaml", "line 3", "replicaton"},
		},
		{
			name: "child outside its parent's prefix",
			yaml: strings.Replace(valid, "orders/part-001", "payments/part-001", 1),
			want: []string{"bad.yaml", "journal hierarchy", "payments/part-001"},
		},
		{
			name: "deletion without a revision",
			yaml: strings.Replace(valid, "    revision: -1\n", "", 1),
			want: []string{"bad.yaml", "ExpectModRevision"},
		},
		{
			name: "empty",
			yaml: "",
			want: []string{"bad.yaml"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var _, err = specs.ParseJournals("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
