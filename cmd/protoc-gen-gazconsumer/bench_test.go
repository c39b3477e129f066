package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"

	"github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer/internal/gengc"
	"github.com/gazconsumer/gazconsumer/internal/protoload"
)

// bigProto returns a .proto of n messages: journal messages, tables keyed
// by three fields, and a consumer of every journal message.
func bigProto(n int) string {
	var b strings.Builder
	b.WriteString(`syntax = "proto3";
package big.v1;
import "gazconsumer/v1/options.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/timestamp.proto";
option go_package = "example.test/big/v1;bigv1";
enum Kind { KIND_UNSPECIFIED = 0; KIND_A = 1; }
`)
	var tables []string
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `message M%d {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", partition_key: ["name"]};
  bytes uuid = 1; string name = 2; int64 count = 3; repeated string tags = 4;
  map<string, int64> totals = 5; google.protobuf.Timestamp at = 6; Kind kind = 7;
  oneof o { string s = 8; int64 n = 9; }
}
`, i)
		} else {
			fmt.Fprintf(&b, `message M%d {
  option (gazconsumer.v1.message).table = {key: [{field: "name"}, {field: "at", descending: true}, {field: "kind"}]};
  string name = 1; google.protobuf.Timestamp at = 2; Kind kind = 3; int64 count = 4; repeated double xs = 5;
}
`, i)
			tables = append(tables, fmt.Sprintf("%q", fmt.Sprintf("M%d", i)))
		}
	}
	fmt.Fprintf(&b, "service Big {\n  option (gazconsumer.v1.consumer) = {tables: [%s]};\n", strings.Join(tables[:10], ", "))
	for i := 0; i < n; i += 2 {
		fmt.Fprintf(&b, "  rpc OnM%d(M%d) returns (google.protobuf.Empty);\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// BenchmarkPluginVsProtocGenGo times protoc-gen-gazconsumer and
// protoc-gen-go on one 500-message .proto, and reports the ratio of their
// times as "x-protoc-gen-go".
func BenchmarkPluginVsProtocGenGo(b *testing.B) {
	sources := map[string]string{"big/v1/big.proto": bigProto(500)}
	compiled, err := protoload.Compile(context.Background(), protoload.InMemory(sources, protoRoot), nil, "big/v1/big.proto")
	if err != nil {
		b.Fatal(err)
	}
	req := request(b, compiled, []string{"big/v1/big.proto"})

	var ours, theirs time.Duration
	var oursBytes, theirsBytes int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		gen, err := protogen.Options{}.New(req)
		if err != nil {
			b.Fatal(err)
		}
		if err := gengc.Generate(gen, gengc.Options{}); err != nil {
			b.Fatal(err)
		}
		resp := gen.Response()
		ours += time.Since(start)
		oursBytes = len(resp.File[0].GetContent())

		start = time.Now()
		gen, err = protogen.Options{}.New(req)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range gen.Files {
			if f.Generate {
				gengo.GenerateFile(gen, f)
			}
		}
		resp = gen.Response()
		theirs += time.Since(start)
		theirsBytes = len(resp.File[0].GetContent())
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "gazconsumer-ns/op")
	b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N), "protoc-gen-go-ns/op")
	b.ReportMetric(float64(ours)/float64(theirs), "x-protoc-gen-go")
	b.ReportMetric(float64(oursBytes), "gazconsumer-bytes")
	b.ReportMetric(float64(theirsBytes), "protoc-gen-go-bytes")
}
