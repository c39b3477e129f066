package groupkeys

import (
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// Specs and statuses decode and validate; a spec whose identity is not its
// key's is refused, naming both.
func TestDecoder(t *testing.T) {
	var shard = pc.ShardSpec{Id: "shard-00", Sources: []pc.ShardSpec_Source{{Journal: "a/part-00"}},
		RecoveryLogPrefix: "recovery", HintPrefix: "/hints", MaxTxnDuration: 1e9}
	if _, err := (decoder{}).DecodeItem("shard-00", &mvccpb.KeyValue{Value: []byte(shard.MarshalString())}); err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
	if _, err := (decoder{}).DecodeItem("shard-01", &mvccpb.KeyValue{Value: []byte(shard.MarshalString())}); err == nil ||
		!strings.Contains(err.Error(), `"shard-00" differs from its key's "shard-01"`) {
		t.Fatalf("a spec of another key: %v", err)
	}
	if _, err := (decoder{}).DecodeItem("shard-00", &mvccpb.KeyValue{Value: []byte("not a spec")}); err == nil {
		t.Fatal("garbage decoded")
	}
	var member = pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: pb.ProcessSpec_ID{Zone: "z", Suffix: "member-1"}, Endpoint: "http://m:1"}, ShardLimit: 1}
	if _, err := (decoder{}).DecodeMember("z", "member-1", &mvccpb.KeyValue{Value: []byte(member.MarshalString())}); err != nil {
		t.Fatalf("a valid member: %v", err)
	}
	if _, err := (decoder{}).DecodeMember("z", "other", &mvccpb.KeyValue{Value: []byte(member.MarshalString())}); err == nil {
		t.Fatal("a member of another key decoded")
	}
	var st = pc.ReplicaStatus{Code: pc.ReplicaStatus_PRIMARY}
	if _, err := (decoder{}).DecodeAssignment("", "", "", 0, &mvccpb.KeyValue{Value: []byte(st.MarshalString())}); err != nil {
		t.Fatalf("a valid status: %v", err)
	}
}
