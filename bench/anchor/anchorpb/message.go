package anchorpb

import (
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// GetUUID returns the message's UUID.
func (m *Add) GetUUID() (uuid message.UUID) { copy(uuid[:], m.Uuid); return }

// SetUUID sets the message's UUID.
func (m *Add) SetUUID(uuid message.UUID) { m.Uuid = uuid[:] }

// NewAcknowledgement returns an empty Add to carry an acknowledgement.
func (m *Add) NewAcknowledgement(pb.Journal) message.Message { return new(Add) }
