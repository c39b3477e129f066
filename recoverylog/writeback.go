package recoverylog

import (
	"log/slog"
	"os"
)

// writeBehindBytes is how many bytes of a file a player writes between the
// writebacks it begins.
const writeBehindBytes = 1 << 20

// writeBehind begins the writeback of the files a player writes, each time
// one has writeBehindBytes more written: the disk writes as the player
// plays, rather than all at once when the kernel's dirty pages run over or
// the played files are synced, and a file being played holds no more than
// that of dirty pages.
type writeBehind struct {
	unsynced map[Fnode]int64 // Bytes written to each file since its last writeback began.
	start    func(*os.File) error
	failed   bool // Whether start failed once: it isn't tried again.
}

// wrote counts n bytes written to file, of node fn.
func (w *writeBehind) wrote(fn Fnode, file *os.File, n int) {
	if w.failed {
		return
	}
	if w.unsynced[fn] += int64(n); w.unsynced[fn] < writeBehindBytes {
		return
	}
	w.unsynced[fn] = 0
	if err := w.start(file); err != nil {
		// A file system may decline it (ENOSYS, EINVAL): the kernel then
		// writes the pages back when it will, as without it.
		slog.Debug("beginning the writeback of played files", "file", file.Name(), "err", err)
		w.failed = true
	}
}

// forget forgets node fn, whose file the player closed.
func (w *writeBehind) forget(fn Fnode) { delete(w.unsynced, fn) }
