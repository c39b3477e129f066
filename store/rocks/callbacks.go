package rocks

// #include <stdint.h>
// #include <stdlib.h>
import "C"

import (
	"errors"
	"io/fs"
	"runtime/cgo"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/recoverylog"
)

// Callbacks of the C++ file system (shim.cc). Each returns NULL, or an
// error message allocated with malloc, which the C++ side frees.

func recorderOf(h C.uintptr_t) FileRecorder { return cgo.Handle(h).Value().(FileRecorder) }

func cerr(err error) *C.char {
	if err == nil {
		return nil
	}
	return C.CString(err.Error())
}

func gostr(p *C.char, n C.size_t) string { return C.GoStringN(p, C.int(n)) }

//export gcRecNew
func gcRecNew(h C.uintptr_t, name *C.char, n C.size_t, fnode *C.uint64_t) *C.char {
	var fn, err = recorderOf(h).NewWritableFile(gostr(name, n))
	*fnode = C.uint64_t(fn)
	return cerr(err)
}

//export gcRecWrite
func gcRecWrite(h C.uintptr_t, fnode C.uint64_t, data *C.char, n C.size_t, offset C.int64_t) *C.char {
	var b = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n)) // Not retained by the recorder.
	if offset < 0 {
		return cerr(recorderOf(h).Append(recoverylog.Fnode(fnode), b))
	}
	return cerr(recorderOf(h).PositionedAppend(recoverylog.Fnode(fnode), b, int64(offset)))
}

//export gcRecSync
func gcRecSync(h C.uintptr_t, fnode C.uint64_t) *C.char {
	return cerr(recorderOf(h).Sync(recoverylog.Fnode(fnode)))
}

//export gcRecClose
func gcRecClose(h C.uintptr_t, fnode C.uint64_t) *C.char {
	return cerr(recorderOf(h).Close(recoverylog.Fnode(fnode)))
}

//export gcRecRename
func gcRecRename(h C.uintptr_t, src *C.char, srcLen C.size_t, dst *C.char, dstLen C.size_t) *C.char {
	return cerr(recorderOf(h).Rename(gostr(src, srcLen), gostr(dst, dstLen)))
}

//export gcRecLink
func gcRecLink(h C.uintptr_t, src *C.char, srcLen C.size_t, dst *C.char, dstLen C.size_t) *C.char {
	return cerr(recorderOf(h).Link(gostr(src, srcLen), gostr(dst, dstLen)))
}

//export gcRecDelete
func gcRecDelete(h C.uintptr_t, name *C.char, n C.size_t) *C.char {
	var err = recorderOf(h).Delete(gostr(name, n))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // A file the log never held (the LOCK file) has nothing to remove.
	}
	return cerr(err)
}
