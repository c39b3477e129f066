package rocks

import "math"

// arena holds the rows of a generation of a rowCache in chunks, so that it
// grows without copying what it holds and keeps its memory from one
// generation to the next. (A slice grown by append copies all it holds at
// each growth, by a quarter once large: about five times a generation's
// bytes as it fills, and as many freshly faulted in, which was a tenth of
// the CPU of a consumer of rows of a kilobyte.) A row lies whole in one
// chunk and is addressed by an offset of the chunk's index and the row's
// place in it.
type arena struct {
	chunks [][]byte // In use: chunks[:n], the last of which is being filled; then some kept for reuse.
	n      int
	held   int // Bytes of capacity of all the chunks, kept ones included.
}

const (
	minChunk   = 4 << 10 // The first chunk's bytes; each next one's are the arena's, up to maxChunk.
	maxChunk   = 1 << 20 // Bytes of a chunk, unless a row needs more.
	chunkShift = 40      // An offset is a chunk's index << chunkShift | the row's place in the chunk.
)

// An offset needs an int of 64 bits: this fails to compile where int has 32.
const _ uint = math.MaxInt>>62 - 1

// alloc returns n bytes of room for a row (n at most 1 << chunkShift), and
// its offset. Their content is undefined.
func (a *arena) alloc(n int) (int, []byte) {
	if a.n > 0 {
		var c = a.chunks[a.n-1]
		if at := len(c); cap(c)-at >= n {
			a.chunks[a.n-1] = c[:at+n]
			return (a.n-1)<<chunkShift | at, c[at : at+n : at+n]
		}
	}
	if a.n == len(a.chunks) {
		a.chunks = append(a.chunks, nil)
	}
	if cap(a.chunks[a.n]) < n { // None kept, or one too small for this row.
		var size = max(min(max(a.held, minChunk), maxChunk), n)
		a.held += size - cap(a.chunks[a.n])
		a.chunks[a.n] = make([]byte, 0, size)
	}
	var c = a.chunks[a.n][:n]
	a.chunks[a.n] = c
	a.n++
	return (a.n - 1) << chunkShift, c[:n:n]
}

// at returns the bytes of the chunk of offset off from off to the end of
// what the chunk holds: a row at off begins them.
func (a *arena) at(off int) []byte {
	return a.chunks[off>>chunkShift][off&(1<<chunkShift-1):]
}

// reset empties a, keeping its chunks.
func (a *arena) reset() {
	for i := range a.chunks[:a.n] {
		a.chunks[i] = a.chunks[i][:0]
	}
	a.n = 0
}

// used returns the bytes of the rows allocated since the last reset.
func (a *arena) used() int {
	var n = 0
	for _, c := range a.chunks[:a.n] {
		n += len(c)
	}
	return n
}
