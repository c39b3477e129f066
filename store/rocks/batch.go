package rocks

import (
	"encoding/binary"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// RocksDB's WriteBatch representation (db/write_batch.cc): a 12-byte header
// of a fixed64 sequence number (assigned by the database on write) and a
// fixed32 count of records, then records of a type tag and length-prefixed
// key (and value) for the default column family.
const (
	batchHeaderLen  = 12
	batchTagDelete  = 0x0 // kTypeDeletion.
	batchTagValue   = 0x1 // kTypeValue.
	maxVarint32Len  = 5
	batchRecordSlop = 1 + 2*maxVarint32Len
)

// appendBatch appends to b the representation of a WriteBatch holding the
// writes of o, in key order, and then the given extra Put.
func appendBatch(b []byte, o *txnkv.Overlay, extraKey, extraValue []byte) []byte {
	var start = len(b)
	b = append(b, make([]byte, batchHeaderLen)...)
	var count uint32
	o.Ascend(nil, nil, func(e txnkv.Entry) bool {
		b, count = appendRecord(b, e.Key, e.Value, e.Deleted), count+1
		return true
	})
	if extraKey != nil {
		b, count = appendRecord(b, extraKey, extraValue, false), count+1
	}
	binary.LittleEndian.PutUint32(b[start+8:], count)
	return b
}

// batchLen bounds the length of the batch of o with an extra Put of extra
// bytes.
func batchLen(o *txnkv.Overlay, extra int) int {
	return batchHeaderLen + o.Bytes() + (o.Len()+1)*batchRecordSlop + extra
}

func appendRecord(b []byte, key, value []byte, deleted bool) []byte {
	if deleted {
		b = append(b, batchTagDelete)
		b = binary.AppendUvarint(b, uint64(len(key)))
		return append(b, key...)
	}
	b = append(b, batchTagValue)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}
