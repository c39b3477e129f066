package runtime_test

// This test is copied next to the generated clash/runtime package by
// TestBuildGoldens. Its Go packages are named store, msg and runtime, and its
// messages and tables for methods of the harness: they compile, and consumer
// Runtime runs through its harness.

import (
	"testing"

	msg "example.test/golden/clash/msg"
	"example.test/golden/clash/runtime"
	"example.test/golden/clash/runtime/runtimetest"
	"example.test/golden/clash/store"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type handler struct{}

func (handler) OnSpec(tx *runtime.RuntimeTxn, m *runtime.Spec) error {
	if err := tx.Commit.Put(&runtime.Commit{Msg: proto.String(m.Table), Handler: int32(m.Kind), Journals: []byte(m.Table)}); err != nil {
		return err
	}
	return tx.PublishPing(&msg.Ping{From: m.Table})
}

func (handler) OnEvent(tx *runtime.RuntimeTxn, m *store.Event) error {
	row := &store.Event_Nested{Id: proto.String(m.GetShard()), N: proto.Int64(int64(m.GetKind()))}
	if m.Kind != nil && *m.Kind > 0 {
		row.At = &timestamppb.Timestamp{Seconds: int64(*m.Kind)}
	}
	if err := tx.Event_Nested.Put(row); err != nil {
		return err
	}
	return tx.Outer_Inner.Put(&runtime.Outer_Inner{K: []byte(m.GetShard()), B: m.Shard != nil, F: 7})
}

func (handler) OnPing(tx *runtime.RuntimeTxn, m *msg.Ping) error {
	return tx.PublishSpec(&runtime.Spec{Kind: runtime.Kind_KIND_A, Table: m.From})
}

func (handler) FinalizeTxn(*runtime.RuntimeTxn) error { return nil }

func TestClashingNames(t *testing.T) {
	h := runtimetest.New(t, handler{})
	h.FeedSpec(&runtime.Spec{Table: "t", Kind: runtime.Kind_KIND_A})
	h.Event(&store.Event{Shard: proto.String("s"), Kind: proto.Int32(0)})
	h.Event(&store.Event{Kind: proto.Int32(2)})
	h.Ping(&msg.Ping{From: "p"})
	h.Commit()
	h.CommitTable.Expect(&runtime.Commit{Msg: proto.String("t"), Handler: 1, Journals: []byte("t")})
	// The unset shard is a key of its own, before that of "s"; Inner's
	// bytes key descending, an unset one first, then B.
	h.Event_Nested.Expect(
		&store.Event_Nested{Id: proto.String(""), At: &timestamppb.Timestamp{Seconds: 2}, N: proto.Int64(2)},
		&store.Event_Nested{Id: proto.String("s"), N: proto.Int64(0)},
	)
	h.Outer_Inner.Expect(
		&runtime.Outer_Inner{K: []byte("s"), B: true, F: 7},
		&runtime.Outer_Inner{K: []byte{}, F: 7},
	)
	h.Published.Ping.Expect(&msg.Ping{From: "t"})
	h.Published.Spec.Expect(&runtime.Spec{Kind: runtime.Kind_KIND_A, Table: "p"})
}
