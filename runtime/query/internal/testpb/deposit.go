package testpb

import (
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/codec"
)

// The methods protoc-gen-gazconsumer generates for a journal message
// annotated {uuid_field: "uuid", partition_key: ["account"]}.

// GetUUID returns the Gazette UUID held in field uuid.
func (x *Deposit) GetUUID() message.UUID { return runtime.UUIDOf(x.GetUuid()) }

// SetUUID stores u in field uuid.
func (x *Deposit) SetUUID(u message.UUID) { x.Uuid = append(x.GetUuid()[:0], u[:]...) }

// NewAcknowledgement returns a new Deposit.
func (x *Deposit) NewAcknowledgement(pb.Journal) message.Message { return new(Deposit) }

// ProtoSize returns the size of the message's protobuf encoding.
func (x *Deposit) ProtoSize() int { return codec.Size(x) }

// MarshalTo writes the protobuf encoding of the message into b.
func (x *Deposit) MarshalTo(b []byte) (int, error) { return codec.MarshalTo(b, x) }

// Unmarshal replaces the message with the protobuf encoding b.
func (x *Deposit) Unmarshal(b []byte) error { return codec.Unmarshal(b, x) }

// AppendPartitionKey appends the encoding of the message's partition key.
func (x *Deposit) AppendPartitionKey(b []byte) []byte {
	return keyenc.AppendString(b, x.GetAccount(), keyenc.Ascending)
}
