package recoverylog

import (
	"io"
	"sync"
)

// readahead reads from a source in a goroutine, ahead of its consumer, so
// that a player's reads from the broker overlap its writes of files.
type readahead struct {
	ch   chan chunk
	done chan struct{}
	wg   sync.WaitGroup
	cur  chunk
	pool sync.Pool
}

type chunk struct {
	buf []byte // Unread data.
	all []byte // Backing buffer, recycled when consumed.
	err error
}

const readaheadChunk = 256 << 10

// newReadahead reads src ahead. If limit is non-zero, src ends after at most
// limit bytes, and buffers are no larger.
func newReadahead(src io.Reader, limit int64) *readahead {
	var ra = &readahead{ch: make(chan chunk, 4), done: make(chan struct{})}
	var size = readaheadChunk
	if limit > 0 && limit < readaheadChunk {
		size = int(limit)
	}
	ra.pool.New = func() any { return make([]byte, size) }
	ra.wg.Go(func() {
		defer close(ra.ch)
		for {
			var b = ra.pool.Get().([]byte)
			var n, err = src.Read(b)
			select {
			case ra.ch <- chunk{buf: b[:n], all: b, err: err}:
			case <-ra.done:
				return
			}
			if err != nil {
				return
			}
		}
	})
	return ra
}

// Read implements io.Reader.
func (ra *readahead) Read(p []byte) (int, error) {
	for len(ra.cur.buf) == 0 {
		if ra.cur.err != nil {
			return 0, ra.cur.err
		}
		if ra.cur.all != nil {
			ra.pool.Put(ra.cur.all)
		}
		var c, ok = <-ra.ch
		if !ok {
			return 0, io.ErrClosedPipe
		}
		ra.cur = c
	}
	var n = copy(p, ra.cur.buf)
	ra.cur.buf = ra.cur.buf[n:]
	return n, nil
}

// stop waits for the reading goroutine to exit. The source must first be
// cancelled, if a Read of it may block.
func (ra *readahead) stop() {
	close(ra.done)
	ra.wg.Wait()
}
