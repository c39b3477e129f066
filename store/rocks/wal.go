package rocks

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
)

// An open of a store replays the write-ahead logs its memtables had not
// flushed (a recovered store's, or a new shard's linked to its parent's
// files). By default RocksDB then flushes what it replayed to a table file,
// which the recorder appends to the recovery log before the store serves,
// and deletes the logs. A store whose every log ends with a whole record
// keeps them instead, its memtable holding what they hold (RocksDB's
// avoid_flush_during_recovery), as it would had it never closed. One whose
// last log ends within a record (its process died as it wrote it, or the
// log was copied from a parent still writing it) is flushed as it opens, as
// before: kept, the torn record would stand ahead of the logs written after
// it, and RocksDB's point-in-time recovery stops replaying at such a record
// (and the later logs' writes with it).

// RocksDB's write-ahead log format (db/log_format.h, 7.8): blocks of
// walBlockSize bytes, each a run of physical records of a walHeaderSize
// header (masked CRC-32C of the type and the payload, little-endian; the
// payload's length, little-endian; the type) and a payload, a block's last
// bytes zeros where fewer than a header remain. A logical record is one
// record of walFull, or walFirst, walMiddle..., walLast.
const (
	walBlockSize  = 32 << 10
	walHeaderSize = 7
	walFull       = 1
	walFirst      = 2
	walMiddle     = 3
	walLast       = 4
	walMaskDelta  = 0xa282ead8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// wholeWAL reports whether b, a RocksDB write-ahead log, is a run of whole,
// valid logical records: each physical record's checksum is right, and b
// ends where a logical record does. Records of other types (those of
// recycled logs, which the store turns off, of compression, which it doesn't
// use, or zeros) make it false, as does any doubt.
func wholeWAL(b []byte) bool {
	var off int
	var within bool // A walFirst without its walLast yet.
	for off < len(b) {
		var left = walBlockSize - off%walBlockSize
		if left < walHeaderSize {
			// The trailer: written as the next record begins.
			if off+left > len(b) {
				return false
			}
			for _, c := range b[off : off+left] {
				if c != 0 {
					return false
				}
			}
			off += left
			continue
		}
		if len(b)-off < walHeaderSize {
			return false
		}
		var h = b[off : off+walHeaderSize]
		var n = int(h[4]) | int(h[5])<<8
		if n > left-walHeaderSize || off+walHeaderSize+n > len(b) {
			return false
		}
		var crc = crc32.Update(crc32.Update(0, castagnoli, h[6:7]), castagnoli, b[off+walHeaderSize:off+walHeaderSize+n])
		if (crc>>15|crc<<17)+walMaskDelta != binary.LittleEndian.Uint32(h) {
			return false
		}
		switch h[6] {
		case walFull, walFirst:
			if within {
				return false
			}
			within = h[6] == walFirst
		case walMiddle, walLast:
			if !within {
				return false
			}
			within = h[6] == walMiddle
		default:
			return false
		}
		off += walHeaderSize + n
	}
	return !within
}

// wholeWALs reports whether every write-ahead log in dir is whole
// (wholeWAL), and returns their bytes. A log which can't be read isn't:
// RocksDB's open then meets it too, and fails naming it.
func wholeWALs(dir string) (int64, bool) {
	var entries, err = os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		var b, err = os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !wholeWAL(b) {
			return 0, false
		}
		n += int64(len(b))
	}
	return n, true
}
