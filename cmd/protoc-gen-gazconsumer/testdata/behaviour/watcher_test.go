package editionv1_test

// This test is copied next to the generated edition/v1 package by
// TestBuildGoldens. It drives consumer Watcher, which reads messages of two
// Go packages and publishes to partitions of a selector of its own, through
// its generated test harness (package watchertest).

import (
	"testing"

	acmev1 "example.test/golden/acme/v1"
	editionv1 "example.test/golden/edition/v1"
	"example.test/golden/edition/v1/watchertest"

	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"
)

// echo records the last level of each kind, and publishes each event with
// a level one higher; orders it publishes as events of kind "order".
type echo struct{}

func (echo) OnEvent(tx *editionv1.WatcherTxn, msg *editionv1.Event) error {
	if err := tx.Seen.Put(&editionv1.Seen{Kind: msg.Kind, Level: msg.Level}); err != nil {
		return err
	}
	return tx.PublishEvent(&editionv1.Event{Kind: msg.Kind, Level: proto.Int32(msg.GetLevel() + 1)})
}

func (echo) OnOrder(tx *editionv1.WatcherTxn, msg *acmev1.Order) error {
	return tx.PublishEvent(&editionv1.Event{Kind: proto.String("order"), Values: []int64{int64(len(msg.Items))}})
}

func (echo) FinalizeTxn(*editionv1.WatcherTxn) error { return nil }

func TestWatcherHarness(t *testing.T) {
	h := watchertest.New(t, echo{})
	h.Event(&editionv1.Event{Kind: proto.String("disk"), Level: proto.Int32(2)})
	h.Order(&acmev1.Order{CustomerId: "ann", Items: []*acmev1.Order_Item{{Sku: "x"}, {Sku: "y"}}})
	h.Commit()
	h.Seen.Expect(&editionv1.Seen{Kind: proto.String("disk"), Level: proto.Int32(2)})
	h.Published.Event.Expect(
		&editionv1.Event{Kind: proto.String("disk"), Level: proto.Int32(3)},
		&editionv1.Event{Kind: proto.String("order"), Values: []int64{2}},
	)
	for _, ev := range h.Published.Event.All() {
		if ev.GetUUID() == (message.UUID{}) || message.GetFlags(ev.GetUUID()) != message.Flag_CONTINUE_TXN {
			t.Errorf("published event %v has UUID %v", ev, ev.GetUUID())
		}
	}
}
