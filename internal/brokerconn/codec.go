package brokerconn

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// codec is the gRPC codec of connections to brokers. It marshals Gazette's
// messages (gogo-generated: ProtoSize and MarshalToSizedBuffer) straight
// into a pooled buffer, which it doesn't clear first, as the marshal writes
// every byte of it. gRPC's own codec marshals them through the protobuf
// runtime's legacy wrapper, which marshals each into a new slice and copies
// it into a buffer of gRPC's pool, which clears the whole buffer first: an
// append of a chunk of 32 KiB, as a recovery log's appends are, took and
// cleared a buffer of 1 MiB. Everything else, and every unmarshal, is left to
// gRPC's own codec.
type codec struct{}

// gogoMessage is a message whose gogo-generated code marshals it.
type gogoMessage interface {
	ProtoSize() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// Name is empty: gRPC then names no content-subtype in its requests'
// content-type, which stays "application/grpc", as Gazette's servers, which
// tell gRPC from HTTP by it, expect ("application/grpc+proto", which a codec
// named "proto" would send, is served as HTTP, and the connection is
// reset).
func (codec) Name() string { return "" }

// Marshal marshals v.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	var m, ok = v.(gogoMessage)
	if !ok {
		return encoding.GetCodecV2("proto").Marshal(v)
	}
	var size = m.ProtoSize()
	if mem.IsBelowBufferPoolingThreshold(size) {
		var b = make([]byte, size)
		if err := marshalSized(m, b); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	var b = buffers.Get(size)
	if err := marshalSized(m, *b); err != nil {
		buffers.Put(b)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(b, buffers)}, nil
}

// marshalSized marshals m into b, of its size, which it fills.
func marshalSized(m gogoMessage, b []byte) error {
	if n, err := m.MarshalToSizedBuffer(b); err != nil {
		return fmt.Errorf("marshaling %T: %w", m, err)
	} else if n != len(b) {
		return fmt.Errorf("marshaling %T: wrote %d bytes of its size %d", m, n, len(b))
	}
	return nil
}

// Unmarshal unmarshals data into v, as gRPC's protobuf codec does.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// buffers are the buffers codec marshals into.
var buffers = &dirtyPool{}

// dirtyPool is a mem.BufferPool whose buffers are of a power of two of
// bytes, from 1 << minPooled to 1 << maxPooled, and are not cleared as they
// are reused: their users write every byte they read.
type dirtyPool struct {
	pools [maxPooled - minPooled + 1]sync.Pool
}

// Powers of two of the bytes of dirtyPool's buffers. Larger ones are made
// and dropped.
const (
	minPooled = 10
	maxPooled = 24
)

// class returns the power of two of the buffer of n bytes, at least
// minPooled.
func class(n int) int { return max(minPooled, bits.Len(uint(n-1))) }

// Get returns a buffer of length bytes.
func (p *dirtyPool) Get(length int) *[]byte {
	var c = class(length)
	if c > maxPooled {
		var b = make([]byte, length)
		return &b
	}
	if b, ok := p.pools[c-minPooled].Get().(*[]byte); ok {
		*b = (*b)[:length]
		return b
	}
	var b = make([]byte, length, 1<<c)
	return &b
}

// Put returns a buffer Get returned, or a prefix of it, to the pool.
func (p *dirtyPool) Put(b *[]byte) {
	var n = cap(*b)
	if c := class(n); n == 1<<c && c <= maxPooled {
		*b = (*b)[:0]
		p.pools[c-minPooled].Put(b)
	}
}
