package rocks

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
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
	var whole, _ = wholeWALFrom(bytes.NewReader(b))
	return whole
}

// wholeWALFrom is wholeWAL of the log r reads, which it reads a block at a
// time: a physical record never spans blocks.
func wholeWALFrom(r io.Reader) (bool, error) {
	var block = make([]byte, walBlockSize)
	var within bool // A walFirst without its walLast yet.
	for {
		var n, err = io.ReadFull(r, block)
		if err == io.EOF {
			return !within, nil
		} else if err != nil && err != io.ErrUnexpectedEOF {
			return false, err
		}
		var b = block[:n]
		for off := 0; off < n; {
			if walBlockSize-off < walHeaderSize {
				// The trailer, written as the next record begins: a
				// partial block which ends within it ends before a header.
				if n < walBlockSize || !allZeros(b[off:]) {
					return false, nil
				}
				break
			} else if n-off < walHeaderSize {
				return false, nil
			}
			var h = b[off : off+walHeaderSize]
			var length = int(h[4]) | int(h[5])<<8
			if off+walHeaderSize+length > n {
				return false, nil
			}
			var payload = b[off+walHeaderSize : off+walHeaderSize+length]
			var crc = crc32.Update(crc32.Update(0, castagnoli, h[6:7]), castagnoli, payload)
			if (crc>>15|crc<<17)+walMaskDelta != binary.LittleEndian.Uint32(h) {
				return false, nil
			}
			switch h[6] {
			case walFull, walFirst:
				if within {
					return false, nil
				}
				within = h[6] == walFirst
			case walMiddle, walLast:
				if !within {
					return false, nil
				}
				within = h[6] == walMiddle
			default:
				return false, nil
			}
			off += walHeaderSize + length
		}
		if n < walBlockSize {
			return !within, nil
		}
	}
}

// allZeros reports whether b holds only zeros.
func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// wholeWALs returns the bytes of the write-ahead logs in dir, and whether
// every one is whole (wholeWAL). A log which can't be read isn't: RocksDB's
// open then meets it too, and fails naming it.
func wholeWALs(dir string) (int64, bool) {
	var entries, err = os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n, whole = int64(0), true
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		var info, err = e.Info()
		if err != nil {
			return n, false
		}
		n += info.Size()
		if whole {
			whole = wholeWALAt(filepath.Join(dir, e.Name()))
		}
	}
	return n, whole
}

// wholeWALAt reports whether the write-ahead log at path can be read and is
// whole (wholeWAL).
func wholeWALAt(path string) bool {
	var f, err = os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	whole, err := wholeWALFrom(f)
	return err == nil && whole
}
