package recoverylog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// BenchmarkPlayback compares playback of a recovery log with a raw read of
// the same byte range of the same journal, and reports their ratio of
// throughputs (the goal is at least 0.8).
func BenchmarkPlayback(b *testing.B) {
	var journal = newLog(b)
	var m = newMirror(b, journal, nil, 0xA1)
	var chunk = bytes.Repeat([]byte("recovery log benchmark data....\n"), 2<<10) // 64 KiB.
	for i := range 16 {
		var name = fmt.Sprintf("%06d.sst", i)
		m.create(name)
		for range 32 {
			m.write(name, chunk, -1)
		}
	}
	m.check(m.rec.SyncAll(context.Background()))
	var head = writeHead(b, journal)

	var raw, playback time.Duration
	b.SetBytes(head)
	b.ResetTimer()
	for range b.N {
		var start = time.Now()
		var rr = client.NewRetryReader(context.Background(), stack.Journals(),
			pb.ReadRequest{Journal: journal, EndOffset: head, Block: true})
		if n, err := io.Copy(io.Discard, rr); err != nil || n != head {
			b.Fatalf("raw read of %d bytes: %d, %v", head, n, err)
		}
		raw += time.Since(start)

		start = time.Now()
		var _, _, p = play(b, journal, nil, 0xB2)
		playback += time.Since(start)
		if p.BytesRead() < head {
			b.Fatalf("played %d bytes of %d", p.BytesRead(), head)
		}
	}
	var mb = float64(head) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/playback.Seconds(), "playback-MB/s")
	b.ReportMetric(raw.Seconds()/playback.Seconds(), "playback/raw")
}
