package protopos_test

import (
	"context"
	"testing"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/internal/protopos"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const testProto = `syntax = "proto3";
package t;
import "gazconsumer/v1/options.proto";

message Whole {
  option (gazconsumer.v1.message) = { table: { name: "whole" } };
  string id = 1;
}

message ByField {
  string id = 1;
  option (gazconsumer.v1.message).table.name = "by_field";
  option (gazconsumer.v1.message).table.key = { field: "id" };
}

message Plain {
  string id = 1;
}
`

// Declared and Recorded give the positions of declarations and of the
// statements recorded at or under a path, and say when the source has none.
func TestDeclaredAndRecorded(t *testing.T) {
	var files, err = protoload.Compile(context.Background(),
		protoload.WithOptionsProto(protoload.InMemory(map[string]string{"t.proto": testProto})), nil, "t.proto")
	if err != nil {
		t.Fatal(err)
	}
	var msgs = files[0].Messages()
	var option = []int32{protopos.MessageOptionsField, int32(gcv1.E_Message.Field)}
	var table = append(option[:len(option):len(option)], 2)

	for _, c := range []struct {
		d    protoreflect.Descriptor
		path []int32
		want string // "" if none is recorded.
	}{
		{msgs.ByName("Whole"), nil, "t.proto:5:1"},
		{msgs.ByName("Whole"), option, "t.proto:6:3"},
		{msgs.ByName("Whole"), table, ""},
		{msgs.ByName("ByField"), option, "t.proto:12:3"},
		{msgs.ByName("ByField"), table, "t.proto:12:3"},
		{msgs.ByName("ByField"), append(table, 2), "t.proto:13:3"},
		{msgs.ByName("Plain"), option, ""},
	} {
		var got, ok = protopos.Recorded(c.d, c.path...)
		if (c.want == "") == ok || (ok && got.String() != c.want) {
			t.Errorf("Recorded(%s, %v) = %s, %v; want %q", c.d.FullName(), c.path, got, ok, c.want)
		}
	}
	if got, ok := protopos.Declared(msgs.ByName("Plain")); !ok || got.String() != "t.proto:16:1" {
		t.Errorf("Declared(Plain) = %s, %v", got, ok)
	}

	// Without source info, neither is known; Of says line 1, column 1.
	var fdp = protodesc.ToFileDescriptorProto(files[0])
	fdp.SourceCodeInfo = nil
	bare, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	var plain = bare.Messages().ByName("Plain")
	if got, ok := protopos.Declared(plain); ok {
		t.Errorf("Declared without source info = %s, true", got)
	}
	if got, ok := protopos.Recorded(bare.Messages().ByName("Whole"), option...); ok {
		t.Errorf("Recorded without source info = %s, true", got)
	}
	if got := protopos.Of(plain).String(); got != "t.proto:1:1" {
		t.Errorf("Of without source info = %s", got)
	}
}
