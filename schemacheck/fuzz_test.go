package schemacheck_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/schemacheck"
)

// fieldTypes are the types a fuzzed field may have: valid and invalid key
// types alike.
var fieldTypes = []string{
	"string", "bytes", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
	"sfixed32", "sfixed64", "bool", "float", "double", "Kind", "google.protobuf.Timestamp", "Order",
	"optional string", "optional int64", "repeated string", "repeated int64", "map<string, int64>",
}

// fuzzed are the option values and field types of an annotated file.
type fuzzed struct {
	uuid, messageType, partitionKey string
	tableName, key, tables          string
	framing                         uint8
	types                           []byte
}

// quote quotes s as a .proto string literal (Go's escapes are a subset of
// those of protobuf, but for some, which fail to compile and are skipped).
func quote(s string) string { return strconv.Quote(s) }

// names renders a comma-separated list of names as quoted strings.
func names(list string) string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n != "" {
			out = append(out, quote(n))
		}
	}
	return strings.Join(out, ", ")
}

// source renders the file of f. Its key lists names, comma-separated, each
// descending if it begins with "-".
func (f fuzzed) source() string {
	typ := func(i int) string {
		if i < len(f.types) {
			return fieldTypes[int(f.types[i])%len(fieldTypes)]
		}
		return fieldTypes[i%len(fieldTypes)]
	}
	var key []string
	for _, k := range strings.Split(f.key, ",") {
		if name, desc := strings.CutPrefix(k, "-"); k != "" {
			key = append(key, fmt.Sprintf("{field: %s, descending: %t}", quote(name), desc))
		}
	}
	return fmt.Sprintf(`syntax = "proto3";

package acme.v1;

import "gazconsumer/v1/options.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/timestamp.proto";

enum Kind {
  KIND_UNSPECIFIED = 0;
}

message Order {
  option (gazconsumer.v1.message).journal = {uuid_field: %s, framing: %d, message_type: %s, partition_key: [%s]};
  %s uuid = 1;
  %s customer_id = 2;
  %s cents = 3;
}

message Spend {
  option (gazconsumer.v1.message).table = {name: %s, key: [%s]};
  %s customer_id = 1;
  %s account = 2;
  %s cents = 3;
}

service SpendCounter {
  option (gazconsumer.v1.consumer) = {tables: [%s]};
  rpc OnOrder(Order) returns (google.protobuf.Empty);
}
`, quote(f.uuid), f.framing%4, quote(f.messageType), names(f.partitionKey), typ(0), typ(1), typ(2),
		quote(f.tableName), strings.Join(key, ", "), typ(3), typ(4), typ(5), names(f.tables))
}

// baseline is a valid annotated file, the fuzzer's first seed.
var baseline = fuzzed{
	uuid: "uuid", partitionKey: "customer_id", key: "customer_id,-account", tables: "Spend",
	types: []byte{1, 0, 3, 0, 2, 3},
}

// memResolver resolves "shop.proto" to src, and other files from protoRoot.
func memResolver(src string) protocompile.Resolver {
	return protoload.InMemory(map[string]string{"shop.proto": src}, protoRoot)
}

// FuzzCheck mutates the option values and field types of an annotated
// file: Check must not panic comparing it with the baseline either way, its
// findings must name a file, and the file compared with itself, or with
// a second compilation of itself, must give no findings.
func FuzzCheck(f *testing.F) {
	add := func(z fuzzed) {
		f.Add(z.uuid, z.messageType, z.partitionKey, z.tableName, z.key, z.tables, z.framing, z.types)
	}
	add(baseline)
	add(fuzzed{uuid: "cents", messageType: "acme.orders", partitionKey: "cents,customer_id", tableName: "spend",
		key: "account,customer_id", tables: "Spend,.acme.v1.Order", framing: 2, types: []byte{0, 16, 15, 16, 15, 22}})
	add(fuzzed{uuid: "nope", partitionKey: "nope,uuid", key: "-nope,cents,cents", tables: "Nope,Spend,Spend", framing: 3,
		types: []byte{20, 21, 17, 18, 19, 13}})

	base, err := tryCompile(memResolver(baseline.source()), "shop.proto")
	if err != nil {
		f.Fatalf("compiling the baseline: %v", err)
	}
	f.Fuzz(func(t *testing.T, uuid, messageType, partitionKey, tableName, key, tables string, framing uint8, types []byte) {
		src := fuzzed{uuid, messageType, partitionKey, tableName, key, tables, framing, types}.source()
		cur, err := tryCompile(memResolver(src), "shop.proto")
		if err != nil {
			t.Skipf("does not compile: %v", err)
		}
		again := compileWith(t, memResolver(src), "shop.proto")
		for _, pair := range [][2][]protoreflect.FileDescriptor{{cur, cur}, {cur, again}, {again, cur}} {
			if got := schemacheck.Check(pair[0], pair[1]); len(got) != 0 {
				t.Fatalf("identical inputs give findings: %v\n%s", got, src)
			}
		}
		for _, pair := range [][2][]protoreflect.FileDescriptor{{base, cur}, {cur, base}} {
			for _, finding := range schemacheck.Check(pair[0], pair[1]) {
				if finding.Pos.Path != "shop.proto" || finding.Message == "" {
					t.Fatalf("malformed finding %v\n%s", finding, src)
				}
			}
		}
	})
}
