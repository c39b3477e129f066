package recoverylog

import (
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
)

// writeBehindBytes is how many bytes of a file a player writes between the
// writebacks it begins.
const writeBehindBytes = 1 << 20

// writeBehindQueue is how many writebacks a player's writer may have yet to
// begin: past them, the player skips one, which the file's next covers.
const writeBehindQueue = 16

// writeBehind begins the writeback of the files a player writes, each time
// one has writeBehindBytes more written: the disk writes as the player
// plays, rather than all at once when the kernel's dirty pages run over or
// the played files are synced. A goroutine of its own begins them, since
// the kernel may block the call until the device takes more: the player
// never waits on the disk for it, so a disk slower than the log's reads
// holds the playback up no more than it did without it.
type writeBehind struct {
	start func(*os.File) error

	// Of the playing goroutine:
	unsynced map[Fnode]int64 // Bytes written to each file since its last writeback was asked.
	files    chan *os.File   // To the writer; nil while none runs.
	done     chan struct{}   // Closed as the writer exits.

	stopping atomic.Bool  // The writer begins no more writebacks.
	failed   atomic.Bool  // start failed once: it isn't called again.
	skipped  atomic.Int64 // Writebacks asked and not begun, as the player stopped the writer.
}

// newWriteBehind returns a writeBehind which begins writebacks with start.
func newWriteBehind(start func(*os.File) error) writeBehind {
	return writeBehind{start: start, unsynced: make(map[Fnode]int64)}
}

// wrote counts n bytes written to file, of node fn, and asks the writer to
// begin their writeback if the file has writeBehindBytes unasked.
func (w *writeBehind) wrote(fn Fnode, file *os.File, n int) {
	if w.failed.Load() {
		return
	}
	if w.unsynced[fn] += int64(n); w.unsynced[fn] < writeBehindBytes {
		return
	}
	w.unsynced[fn] = 0
	if w.files == nil {
		w.files, w.done = make(chan *os.File, writeBehindQueue), make(chan struct{})
		w.stopping.Store(false)
		go w.write(w.files, w.done)
	}
	select {
	case w.files <- file:
	default: // The writer is behind the player: the file's next writeback covers these pages.
	}
}

// write begins the writebacks of files until it is closed.
func (w *writeBehind) write(files <-chan *os.File, done chan<- struct{}) {
	defer close(done)
	for file := range files {
		if w.stopping.Load() || w.failed.Load() {
			w.skipped.Add(1)
			continue
		}
		switch err := w.start(file); {
		case err == nil, errors.Is(err, os.ErrClosed):
			// Begun, or the player closed the file since it asked.
		case errors.Is(err, errors.ErrUnsupported):
			// The kernel writes the pages back when it will, as without it.
			slog.Debug("recovery log: the played files' file system declines an early writeback", "file", file.Name(), "err", err)
			w.failed.Store(true)
		default:
			// The player's writes succeeded: what the disk makes of them is
			// for the store's reads and checksums to find.
			slog.Warn("recovery log: beginning the writeback of a played file", "file", file.Name(), "err", err)
			w.failed.Store(true)
		}
	}
}

// forget forgets node fn, whose file the player closed.
func (w *writeBehind) forget(fn Fnode) { delete(w.unsynced, fn) }

// stop ends the writer, if one runs, once the writeback it is beginning is
// begun: it skips those it was asked for and has not begun. A later wrote
// starts another.
func (w *writeBehind) stop() {
	clear(w.unsynced)
	if w.files == nil {
		return
	}
	w.stopping.Store(true)
	close(w.files)
	<-w.done
	w.files, w.done = nil, nil
}
