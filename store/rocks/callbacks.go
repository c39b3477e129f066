package rocks

// #include <stdint.h>
// #include <stdlib.h>
import "C"

import (
	"errors"
	"io/fs"
	"runtime/cgo"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/recoverylog"
)

// Callbacks of the C++ file system (shim.cc). Each returns NULL, or an
// error message allocated with malloc, which the C++ side frees.

// recording is the Go side of a recorded file system: its recorder, and the
// first error the recorder returned, which RocksDB sees only as a message.
type recording struct {
	FileRecorder
	mu  sync.Mutex
	err error
	// wal is one more than the fnode of the write-ahead log RocksDB writes
	// (the last file it created whose name ends in ".log"; 0 before one),
	// and walBytes what it wrote to it.
	wal      atomic.Uint64
	walBytes atomic.Int64
}

// failure returns the first error of the recorder, if any.
func (r *recording) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *recording) cerr(err error) *C.char {
	if err == nil {
		return nil
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	return C.CString(err.Error())
}

func recorderOf(h C.uintptr_t) *recording { return cgo.Handle(h).Value().(*recording) }

func gostr(p *C.char, n C.size_t) string { return C.GoStringN(p, C.int(n)) }

//export gcRecNew
func gcRecNew(h C.uintptr_t, name *C.char, n C.size_t, fnode *C.uint64_t) *C.char {
	var r = recorderOf(h)
	var path = gostr(name, n)
	var fn, err = r.NewWritableFile(path)
	*fnode = C.uint64_t(fn)
	if err == nil && strings.HasSuffix(path, ".log") {
		r.walBytes.Store(0)
		r.wal.Store(uint64(fn) + 1)
	}
	return r.cerr(err)
}

//export gcRecWrite
func gcRecWrite(h C.uintptr_t, fnode C.uint64_t, data *C.char, n C.size_t, offset C.int64_t) *C.char {
	var b = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n)) // Not retained by the recorder.
	var r = recorderOf(h)
	if uint64(fnode)+1 == r.wal.Load() {
		r.walBytes.Add(int64(n))
	}
	if offset < 0 {
		return r.cerr(r.Append(recoverylog.Fnode(fnode), b))
	}
	return r.cerr(r.PositionedAppend(recoverylog.Fnode(fnode), b, int64(offset)))
}

//export gcRecSync
func gcRecSync(h C.uintptr_t, fnode C.uint64_t) *C.char {
	var r = recorderOf(h)
	return r.cerr(r.Sync(recoverylog.Fnode(fnode)))
}

//export gcRecClose
func gcRecClose(h C.uintptr_t, fnode C.uint64_t) *C.char {
	var r = recorderOf(h)
	return r.cerr(r.Close(recoverylog.Fnode(fnode)))
}

//export gcRecRename
func gcRecRename(h C.uintptr_t, src *C.char, srcLen C.size_t, dst *C.char, dstLen C.size_t) *C.char {
	var r = recorderOf(h)
	return r.cerr(r.Rename(gostr(src, srcLen), gostr(dst, dstLen)))
}

//export gcRecLink
func gcRecLink(h C.uintptr_t, src *C.char, srcLen C.size_t, dst *C.char, dstLen C.size_t) *C.char {
	var r = recorderOf(h)
	return r.cerr(r.Link(gostr(src, srcLen), gostr(dst, dstLen)))
}

//export gcRecDelete
func gcRecDelete(h C.uintptr_t, name *C.char, n C.size_t) *C.char {
	var r = recorderOf(h)
	var err = r.Delete(gostr(name, n))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // A file the log never held (the LOCK file) has nothing to remove.
	}
	return r.cerr(err)
}
