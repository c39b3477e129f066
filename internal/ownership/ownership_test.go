package ownership_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/ownership"
	"github.com/gazconsumer/gazconsumer/internal/protoload"
)

// bankProto is a consumer's inputs and tables, as the example bank's: the
// tables LEDGER names of consumer Ledger (rescalable), and the inputs
// INPUTS (rpcs) of it.
const bankProto = `syntax = "proto3";

package bank.v1;

import "gazconsumer/v1/options.proto";
import "google/protobuf/empty.proto";
import "other.proto";

option go_package = "example.test/bank/v1;bankv1";

message Order {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", partition_key: ["customer_id"]};
  bytes uuid = 1;
  string customer_id = 2;
}

message Payment {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", partition_key: ["customer_id"]};
  bytes uuid = 1;
  optional string customer_id = 2;
}

message Click {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", partition_key: ["account_id"]};
  bytes uuid = 1;
  string account_id = 2;
}

message Spread {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  bytes uuid = 1;
}

message Balance {
  option (gazconsumer.v1.message).table = {key: [{field: "customer_id"}, {field: "account_id"}]};
  string customer_id = 1;
  string account_id = 2;
}

message Rank {
  option (gazconsumer.v1.message).table = {
    name: "rank"
    key: [{field: "balance_cents", descending: true}, {field: "customer_id"}, {field: "account_id"}]
  };
  int64 balance_cents = 1;
  optional string customer_id = 2;
  string account_id = 3;
}

message Totals {
  option (gazconsumer.v1.message).table = {key: [{field: "day"}]};
  int32 day = 1;
  string customer_id = 2;
}

message Numbered {
  option (gazconsumer.v1.message).table = {key: [{field: "customer_id"}]};
  int64 customer_id = 1;
}

service Ledger {
  option (gazconsumer.v1.consumer) = {
    tables: [LEDGER]TIMERS
    rescalable: true
  };
INPUTS}

message Release {
  option (gazconsumer.v1.message).timer = {key: [{field: "order_id"}, {field: "customer_id"}]};
  string order_id = 1;
  string customer_id = 2;
}

message Remind {
  option (gazconsumer.v1.message).timer = {key: [{field: "order_id"}]};
  string order_id = 1;
  string customer_id = 2;
}
`

// otherProto is imported by bankProto: a table of another package.
const otherProto = `syntax = "proto3";

package other.v1;

import "gazconsumer/v1/options.proto";

message Audit {
  option (gazconsumer.v1.message).table = {key: [{field: "at"}, {field: "customer_id", descending: true}]};
  int64 at = 1;
  string customer_id = 2;
}
`

// ledger compiles bankProto with tables and inputs, and returns consumer
// Ledger.
func ledger(t *testing.T, tables, inputs string) protoreflect.ServiceDescriptor {
	t.Helper()
	return ledgerTimers(t, tables, "", inputs)
}

// ledgerTimers is ledger, whose consumer also sets the timers timers (an
// option field, as ` timers: ["Release"]`).
func ledgerTimers(t *testing.T, tables, timers, inputs string) protoreflect.ServiceDescriptor {
	t.Helper()
	src := strings.NewReplacer("LEDGER", tables, "TIMERS", timers, "INPUTS", inputs).Replace(bankProto)
	files, err := protoload.Compile(context.Background(),
		protoload.InMemory(map[string]string{"bank.proto": src, "other.proto": otherProto}, "../../proto"), nil, "bank.proto")
	if err != nil {
		t.Fatalf("compiling: %v\n%s", err, src)
	}
	return files[0].Services().ByName("Ledger")
}

const (
	onOrder   = "  rpc OnOrder(Order) returns (google.protobuf.Empty);\n"
	onPayment = "  rpc OnPayment(Payment) returns (google.protobuf.Empty);\n"
	onClick   = "  rpc OnClick(Click) returns (google.protobuf.Empty);\n"
	onSpread  = "  rpc OnSpread(Spread) returns (google.protobuf.Empty);\n"
)

func TestOwned(t *testing.T) {
	c, err := ownership.Of(ledger(t, `"Balance", "Rank", ".other.v1.Audit"`, onOrder+onPayment), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil || c.NoKey != nil || !c.Required {
		t.Fatalf("Ledger: Err %v, NoKey %v, Required %v; want it rescalable, and required", err, c.NoKey, c.Required)
	}
	if len(c.PartitionKey) != 1 || c.PartitionKey[0].Name() != "customer_id" || c.Input.FullName() != "bank.v1.Order" {
		t.Errorf("partition key %v of %v, want (customer_id) of bank.v1.Order", c.PartitionKey, c.Input)
	}
	for i, want := range []struct {
		name  string
		owner int
		key   string
	}{{"bank.v1.Balance", 0, "customer_id"}, {"rank", 1, "customer_id"}, {"other.v1.Audit", 1, "customer_id"}} {
		tb := c.Tables[i]
		if tb.Name != want.name || tb.Unowned != nil || len(tb.Owner) != 1 || tb.Owner[0] != want.owner ||
			tb.Key[tb.Owner[0]].Field.Name() != protoreflect.Name(want.key) {
			t.Errorf("table %d: %+v, want %s owned by key field %d", i, tb, want.name, want.owner)
		}
	}
	if !c.Tables[1].Key[0].Descending || !c.Tables[2].Key[1].Descending || c.Tables[0].Key[0].Descending {
		t.Error("the key fields' directions are not those of the tables")
	}
}

func TestUnowned(t *testing.T) {
	for _, tc := range []struct {
		name, tables, inputs string
		want                 string // The consumer's Err.
		noKey                bool
	}{
		{"no such field", `"Balance", "Totals"`, onOrder,
			"bank.proto:62:3: table Totals (bank.proto:51:3) of consumer Ledger has no key field customer_id of type string, a field of the partition key (customer_id string) of its inputs (bank.v1.Order, bank.proto:12:3): its field customer_id (bank.proto:53:3) is not one of its key fields (day); its rows have no owner, so the consumer can't be rescaled", false},
		{"another type", `"Numbered"`, onOrder,
			"bank.proto:62:3: table Numbered (bank.proto:57:3) of consumer Ledger has no key field customer_id of type string, a field of the partition key (customer_id string) of its inputs (bank.v1.Order, bank.proto:12:3): its key field customer_id (bank.proto:58:3) is int64, not string; its rows have no owner, so the consumer can't be rescaled", false},
		{"inputs differ", `"Balance"`, onOrder + onClick,
			"bank.proto:67:3: consumer Ledger reads bank.v1.Order (bank.proto:12:3), partitioned by (customer_id string), and bank.v1.Click (bank.proto:24:3), partitioned by (account_id string): its inputs share no partition key, so no shard owns a key's rows", true},
		{"spread", `"Balance"`, onSpread + onOrder,
			"bank.proto:67:3: consumer Ledger reads bank.v1.Spread (bank.proto:30:3), which has no partition key, and bank.v1.Order (bank.proto:12:3), partitioned by (customer_id string): its inputs share no partition key, so no shard owns a key's rows", true},
		{"spread alone", `"Balance"`, onSpread,
			"bank.proto:66:3: consumer Ledger reads bank.v1.Spread (bank.proto:30:3), which has no partition key: its messages are spread over the partitions at random, so no shard owns a key's rows", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ownership.Of(ledger(t, tc.tables, tc.inputs), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Err(); err == nil || err.Error() != tc.want {
				t.Fatalf("Err\n got: %v\nwant: %s", err, tc.want)
			}
			if tc.noKey != (c.NoKey != nil) || (c.NoKey == nil) != (c.PartitionKey != nil) {
				t.Errorf("NoKey %v, partition key %v", c.NoKey, c.PartitionKey)
			}
			last := c.Tables[len(c.Tables)-1]
			if last.Unowned == nil || last.Owner != nil || !strings.Contains(last.Unowned.Error(), "table "+string(last.Message.Name())+" (") {
				t.Errorf("table %s: owner %v, unowned %v", last.Name, last.Owner, last.Unowned)
			}
		})
	}
}

// TestEntryPosition checks that a table without an owner is positioned at
// its entry in the consumer's option tables, when the option is given
// field by field (an option given as one message literal is recorded as a
// whole: its position is that of the option).
func TestEntryPosition(t *testing.T) {
	svc := ledger(t, `"Balance"`, onOrder)
	src := strings.NewReplacer("LEDGER", `"Balance"`, "TIMERS", "", "INPUTS", onOrder).Replace(bankProto)
	src = strings.Replace(src, "option (gazconsumer.v1.consumer) = {\n    tables: [\"Balance\"]\n    rescalable: true\n  };",
		"option (gazconsumer.v1.consumer).tables = \"Balance\";\n  option (gazconsumer.v1.consumer).tables = \"Numbered\";", 1)
	files, err := protoload.Compile(context.Background(),
		protoload.InMemory(map[string]string{"bank.proto": src, "other.proto": otherProto}, "../../proto"), nil, "bank.proto")
	if err != nil {
		t.Fatal(err)
	}
	svc = files[0].Services().ByName("Ledger")
	c, err := ownership.Of(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Required || c.Tables[0].Unowned != nil || c.Tables[1].Unowned == nil ||
		!strings.HasPrefix(c.Err().Error(), "bank.proto:63:3: table Numbered (bank.proto:57:3) of consumer Ledger has no key field customer_id") {
		t.Errorf("Err %v, required %v", c.Err(), c.Required)
	}

	// A timer is positioned at its entry in the option timers.
	src = strings.Replace(src, "option (gazconsumer.v1.consumer).tables = \"Numbered\";",
		"option (gazconsumer.v1.consumer).timers = \"Release\";\n  option (gazconsumer.v1.consumer).timers = \"Remind\";", 1)
	src = strings.Replace(src, onOrder, onOrder+"  rpc OnRelease(Release) returns (google.protobuf.Empty);\n  rpc OnRemind(Remind) returns (google.protobuf.Empty);\n", 1)
	if files, err = protoload.Compile(context.Background(),
		protoload.InMemory(map[string]string{"bank.proto": src, "other.proto": otherProto}, "../../proto"), nil, "bank.proto"); err != nil {
		t.Fatal(err)
	}
	if c, err = ownership.Of(files[0].Services().ByName("Ledger"), nil); err != nil {
		t.Fatal(err)
	}
	if c.Timers[0].Unowned != nil || c.Err() == nil || !strings.HasPrefix(c.Err().Error(), "bank.proto:64:3: timer Remind (") {
		t.Errorf("timers: Err %v", c.Err())
	}
}

func TestNoTables(t *testing.T) {
	c, err := ownership.Of(ledger(t, "", onOrder+onClick), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.NoKey == nil || c.Err() != nil {
		t.Errorf("a consumer without tables: NoKey %v, Err %v; want NoKey, and no Err", c.NoKey, c.Err())
	}
}

func TestInvalid(t *testing.T) {
	svc := ledger(t, `"Nope"`, onOrder)
	if _, err := ownership.Of(svc, nil); err == nil || err.Error() != `bank.proto:62:3: table "Nope" of consumer Ledger is not a known message` {
		t.Errorf("a table of no message: %v", err)
	}
	if _, err := ownership.Of(ledger(t, `"Order"`, onOrder), nil); err == nil || !strings.Contains(err.Error(), "has no (gazconsumer.v1.message).table option") {
		t.Errorf("a table of a message that is not one: %v", err)
	}
	other := svc.ParentFile().Services()
	if other.Len() != 1 {
		t.Fatal(other.Len())
	}
	files, err := protoload.Compile(context.Background(), protoload.InMemory(map[string]string{"plain.proto": `syntax = "proto3";
package p;
import "google/protobuf/empty.proto";
service Plain { rpc Do(google.protobuf.Empty) returns (google.protobuf.Empty); }
`}, "../../proto"), nil, "plain.proto")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ownership.Of(files[0].Services().Get(0), nil); err == nil || err.Error() != "plain.proto:4:1: service p.Plain is not a consumer: it has no (gazconsumer.v1.consumer) option" {
		t.Errorf("a service that is not a consumer: %v", err)
	}
}

// TestLinked checks the rule on descriptors whose options are of the types
// linked into the program, as protoc-gen-gazconsumer's are, resolving
// tables with a registry.
func TestLinked(t *testing.T) {
	svc := ledger(t, `"Rank", "Totals"`, onOrder)
	set := protoload.Collect(svc.ParentFile())
	files, err := protoload.LinkSet(set, true)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName("bank.v1.Ledger")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ownership.Of(d.(protoreflect.ServiceDescriptor), files)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Required || c.Tables[0].Owner[0] != 1 || c.Tables[1].Unowned == nil ||
		!strings.HasPrefix(c.Err().Error(), "bank.proto:62:3: table Totals (bank.proto:51:3)") {
		t.Errorf("linked: %+v, Err %v", c, c.Err())
	}
}

func TestSameType(t *testing.T) {
	svc := ledger(t, `"Balance"`, onOrder)
	msgs := svc.ParentFile().Messages()
	field := func(m, f string) protoreflect.FieldDescriptor {
		return msgs.ByName(protoreflect.Name(m)).Fields().ByName(protoreflect.Name(f))
	}
	if !ownership.SameType(field("Order", "customer_id"), field("Rank", "customer_id")) {
		t.Error("string and optional string differ")
	}
	if ownership.SameType(field("Order", "customer_id"), field("Numbered", "customer_id")) {
		t.Error("string and int64 are the same")
	}
	if !ownership.SamePartitionKey([]protoreflect.FieldDescriptor{field("Order", "customer_id")}, []protoreflect.FieldDescriptor{field("Payment", "customer_id")}) ||
		ownership.SamePartitionKey([]protoreflect.FieldDescriptor{field("Order", "customer_id")}, []protoreflect.FieldDescriptor{field("Click", "account_id")}) {
		t.Error("SamePartitionKey")
	}
}

// TestTimers checks that timers are owned as tables are: by the key field
// of the partition key, which a timer's key must carry.
func TestTimers(t *testing.T) {
	const onRelease, onRemind = "  rpc OnRelease(Release) returns (google.protobuf.Empty);\n", "  rpc OnRemind(Remind) returns (google.protobuf.Empty);\n"
	c, err := ownership.Of(ledgerTimers(t, `"Balance"`, ` timers: ["Release"]`, onOrder+onRelease), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err != nil || len(c.Timers) != 1 {
		t.Fatalf("Err %v, timers %+v; want one timer, owned", err, c.Timers)
	}
	if tm := c.Timers[0]; !tm.Timer || tm.Name != "timer:bank.v1.Release" || len(tm.Owner) != 1 || tm.Owner[0] != 1 {
		t.Errorf("timer %+v, want timer:bank.v1.Release owned by its key field 1", tm)
	}

	c, err = ownership.Of(ledgerTimers(t, `"Balance"`, ` timers: ["Release", "Remind"]`, onOrder+onRelease+onRemind), nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = "bank.proto:62:3: timer Remind (bank.proto:78:3) of consumer Ledger has no key field customer_id of type string, a field of the partition key (customer_id string) of its inputs (bank.v1.Order, bank.proto:12:3): its field customer_id (bank.proto:80:3) is not one of its key fields (order_id); its timers have no owner, so the consumer can't be rescaled"
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("Err\n got: %v\nwant: %s", err, want)
	}

	c, err = ownership.Of(ledgerTimers(t, "", ` timers: ["Release"]`, onOrder+onClick+onRelease), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "its inputs share no partition key") || c.Timers[0].Unowned == nil ||
		!strings.HasPrefix(c.Timers[0].Unowned.Error(), "bank.proto:62:3: timer Release (bank.proto:72:3) of consumer Ledger has no owner") {
		t.Errorf("a consumer of timers, without a partition key: Err %v, timer %v", err, c.Timers[0].Unowned)
	}
	if _, err := ownership.Of(ledgerTimers(t, "", ` timers: ["Balance"]`, onOrder), nil); err == nil ||
		!strings.Contains(err.Error(), "message bank.v1.Balance has no (gazconsumer.v1.message).timer option") {
		t.Errorf("a timer of a table: %v", err)
	}
}
