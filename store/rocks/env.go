package rocks

// #cgo CXXFLAGS: -std=c++17 -O2
// #cgo LDFLAGS: -lrocksdb -lstdc++
// #include "shim.h"
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
)

// FileRecorder records the file operations of a store's directory into its
// recovery log. *recoverylog.Recorder implements it. Paths are absolute
// within the store's directory. Its methods are called from RocksDB's
// threads, concurrently.
type FileRecorder interface {
	// NewWritableFile records the creation of an empty file, replacing any
	// file of that name, and returns its handle.
	NewWritableFile(name string) (recoverylog.Fnode, error)
	// Append records data appended to the file.
	Append(fn recoverylog.Fnode, data []byte) error
	// PositionedAppend records data written at offset of the file.
	PositionedAppend(fn recoverylog.Fnode, data []byte, offset int64) error
	// Sync orders every op recorded so far before those recorded after:
	// the log holds none of these without all of those. It needn't wait
	// for them to commit: commits wait (Barrier).
	Sync(fn recoverylog.Fnode) error
	// Close releases the file handle.
	Close(fn recoverylog.Fnode) error
	// Rename records the move of a file, replacing any file at dst.
	Rename(src, dst string) error
	// Link records dst as a new name of file src.
	Link(src, dst string) error
	// Delete records the removal of a file.
	Delete(name string) error
	// Barrier resolves once every op recorded so far is committed to the
	// log, and after waitFor resolve.
	Barrier(waitFor client.OpFutures) client.OpFuture
}

// Compile-time check that the recovery log's Recorder fits.
var _ FileRecorder = (*recoverylog.Recorder)(nil)

// newRecordedEnv returns a RocksDB Env whose file system records into rec
// through handle h, which must hold rec and outlive the Env.
func newRecordedEnv(h cgo.Handle) (*grocksdb.Env, error) {
	var env = grocksdb.NewDefaultEnv()
	// grocksdb.Env holds exactly its *C.rocksdb_env_t; it exposes no way to
	// wrap a custom one, so reach for it.
	if unsafe.Sizeof(*env) != unsafe.Sizeof(uintptr(0)) {
		env.Destroy()
		return nil, fmt.Errorf("grocksdb.Env layout changed: %d bytes", unsafe.Sizeof(*env))
	}
	var cEnv = *(*unsafe.Pointer)(unsafe.Pointer(env))
	if msg := C.gc_install_recorded_fs(cEnv, C.uintptr_t(h)); msg != nil {
		env.Destroy()
		return nil, fmt.Errorf("installing recorded file system: %w", cError(msg))
	}
	return env, nil
}
