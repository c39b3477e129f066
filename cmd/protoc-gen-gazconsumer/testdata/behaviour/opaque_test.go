package opaquev1_test

// This test is copied next to the generated opaque/v1 package by
// TestBuildGoldens. It drives consumer Sensors, whose messages are of the
// opaque and hybrid APIs and whose keys have fields of explicit presence,
// through its generated test harness (package sensorstest).

import (
	"testing"

	opaquev1 "example.test/golden/opaque/v1"
	"example.test/golden/opaque/v1/sensorstest"

	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// latest records each reading as the latest of its key, and publishes it
// back with its value doubled.
type latest struct{}

func (latest) OnReading(tx *opaquev1.SensorsTxn, msg *opaquev1.Reading) error {
	row := opaquev1.Latest_builder{Value: msg.GetValue(), Count: proto.Uint32(1)}.Build()
	if msg.HasSensor() {
		row.SetSensor(msg.GetSensor())
	}
	if msg.HasLevel() {
		row.SetLevel(msg.GetLevel())
	}
	if msg.HasTag() {
		row.SetTag(msg.GetTag())
	}
	if msg.HasAt() {
		row.SetAt(msg.GetAt())
	}
	if prev, ok, err := tx.Latest.Get(tx.Latest.KeyOf(row)); err != nil {
		return err
	} else if ok {
		row.SetCount(prev.GetCount() + 1)
	}
	if err := tx.Latest.Put(row); err != nil {
		return err
	}
	if err := tx.Hybrid.Put(&opaquev1.Hybrid{Sensor: proto.String(msg.GetSensor()), Bucket: uint64(msg.GetValue() % 2), Total: proto.Int64(msg.GetValue())}); err != nil {
		return err
	}
	out := proto.Clone(msg).(*opaquev1.Reading)
	out.SetValue(2 * msg.GetValue())
	return tx.PublishReading(out)
}

func (latest) FinalizeTxn(*opaquev1.SensorsTxn) error { return nil }

func reading(sensor *string, value int64, tag []byte) *opaquev1.Reading {
	r := opaquev1.Reading_builder{Sensor: sensor, Value: proto.Int64(value), Tag: tag}.Build()
	return r
}

func TestOpaqueHarness(t *testing.T) {
	h := sensorstest.New(t, latest{})
	h.Reading(reading(nil, 1, nil))                   // Sensor and tag not set.
	h.Reading(reading(proto.String(""), 2, []byte{})) // Set, to their zero values: another key.
	h.Reading(reading(proto.String("a"), 3, []byte{1}))
	h.Reading(reading(proto.String(""), 2, []byte{})) // Again: counted twice.
	at := reading(proto.String("a"), 3, []byte{1})
	at.SetAt(&timestamppb.Timestamp{Seconds: 5})
	h.Reading(at) // A timestamp set: after the key of none.
	h.Commit()
	h.Latest.Expect(
		opaquev1.Latest_builder{Value: 1, Count: proto.Uint32(1)}.Build(),
		opaquev1.Latest_builder{Sensor: proto.String(""), Tag: []byte{}, Value: 2, Count: proto.Uint32(2)}.Build(),
		opaquev1.Latest_builder{Sensor: proto.String("a"), Tag: []byte{1}, Value: 3, Count: proto.Uint32(1)}.Build(),
		opaquev1.Latest_builder{Sensor: proto.String("a"), Tag: []byte{1}, At: &timestamppb.Timestamp{Seconds: 5}, Value: 3, Count: proto.Uint32(1)}.Build(),
	)
	if row, ok := h.Latest.Get(opaquev1.LatestKey{Sensor: proto.String(""), Tag: []byte{}, Value: 2}); !ok || row.GetCount() != 2 || !row.HasTag() {
		t.Errorf("the row of an empty sensor and tag is %v, %v", row, ok)
	}
	if _, ok := h.Latest.Get(opaquev1.LatestKey{Value: 2}); ok {
		t.Error("the row of an empty sensor is that of an unset one")
	}
	h.Hybrid.Expect(
		&opaquev1.Hybrid{Sensor: proto.String(""), Bucket: 0, Total: proto.Int64(2)},
		&opaquev1.Hybrid{Sensor: proto.String(""), Bucket: 1, Total: proto.Int64(1)},
		&opaquev1.Hybrid{Sensor: proto.String("a"), Bucket: 1, Total: proto.Int64(3)},
	)
	atOut := reading(proto.String("a"), 6, []byte{1})
	atOut.SetAt(&timestamppb.Timestamp{Seconds: 5})
	h.Published.Reading.Expect(
		reading(nil, 2, nil), reading(proto.String(""), 4, []byte{}), reading(proto.String("a"), 6, []byte{1}), reading(proto.String(""), 4, []byte{}), atOut,
	)
	for _, r := range h.Published.Reading.All() {
		if r.GetUUID() == (message.UUID{}) || len(r.GetId()) != 16 {
			t.Errorf("published reading %v has UUID %v", r, r.GetUUID())
		}
	}
}
