package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// A store whose old files stay live (as RocksDB's IDENTITY, OPTIONS and
// oldest tables do) pins the whole log. Compaction re-records them at the
// head: hints then need only the log's recent span, playback from every
// generation of hints and from the start stays byte-identical, and pruning
// deletes only fragments which no kept generation needs.
func TestCompactionThenPrune(t *testing.T) {
	// Long enough for a broker's persister to persist a fragment it queued
	// (one whose first persist failed): up to three ticks, a minute apart.
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	var chunk = func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 0xC0}, 20<<10) } // 60 KiB.

	// Old files which stay live, among many which die.
	m.create("IDENTITY-like")
	m.write("IDENTITY-like", []byte("identity"), -1)
	m.create("old.sst")
	for i := range 8 {
		m.write("old.sst", chunk(i), -1)
	}
	m.create("open.log") // Stays open for appends, as a WAL or MANIFEST.
	m.write("open.log", []byte("first"), -1)
	for i := range 40 {
		var name = fmt.Sprintf("dead-%02d.sst", i)
		m.create(name)
		m.write(name, chunk(i), -1)
		m.write(name, chunk(i+1), -1)
		if i%10 == 0 {
			m.link(name, name+".link") // A file with two names.
		} else {
			m.remove(name)
		}
	}
	m.write("open.log", []byte("second"), -1)
	var before = m.hints()
	var statsBefore = StatsOf(before)
	if statsBefore.NeededFrom > 1024 {
		t.Fatalf("before compaction, hints need the log from %d, not about its start", statsBefore.NeededFrom)
	}

	// A policy the log doesn't exceed does nothing.
	var res, err = m.rec.Compact(ctx, Compaction{Ratio: 100})
	if err != nil || res.Files != 0 {
		t.Fatalf("Compact under the ratio: %+v, %v", res, err)
	}
	res, err = m.rec.Compact(ctx, Compaction{Ratio: 1.2})
	if err != nil {
		t.Fatal(err)
	} else if res.Files == 0 || res.Bytes == 0 || res.Span <= res.LiveBytes {
		t.Fatalf("Compact: %+v", res)
	}
	// The store goes on: appends to a rebased open file, and new files.
	m.write("open.log", []byte("third"), -1)
	m.create("new.sst")
	m.write("new.sst", chunk(99), -1)
	var after1 = m.hints()
	m.write("open.log", []byte("fourth"), -1)
	m.remove("dead-10.sst.link")
	var after2 = m.hints()

	var stats = StatsOf(after2)
	if stats.NeededFrom <= statsBefore.End/2 {
		t.Fatalf("after compaction, hints still need the log from %d (of %d)", stats.NeededFrom, stats.End)
	} else if float64(stats.HintedBytes) > 1.5*float64(stats.LiveBytes) {
		t.Fatalf("after compaction, hints read %d bytes for %d live bytes", stats.HintedBytes, stats.LiveBytes)
	}
	for i, h := range []*Hints{before, after1, after2, nil} {
		var _, dir, _ = play(t, journal, h, Author(0xB0+i))
		if h == after2 || h == nil {
			sameTree(t, m.dir, dir)
		}
	}

	// Prune what neither generation after the compaction needs, once the
	// brokers have persisted it.
	var prunable []pb.Fragment
	for persisted := false; !persisted; {
		if prunable, err = Prunable(ctx, stack.Journals(), journal, after1, after2); err != nil {
			t.Fatal(err)
		}
		persisted = len(prunable) != 0 && prunable[len(prunable)-1].BackingStore != ""
		for _, f := range prunable {
			persisted = persisted && f.BackingStore != ""
		}
		if !persisted {
			select {
			case <-ctx.Done():
				t.Fatalf("prunable fragments %v were never persisted", prunable)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	removed, err := Prune(ctx, stack.Journals(), journal, after1, after2)
	if err != nil {
		t.Fatal(err)
	} else if len(removed) != len(prunable) {
		t.Fatalf("pruned %d fragments of %d prunable", len(removed), len(prunable))
	}
	var needed = NeededFrom(journal, after1, after2)
	for _, f := range removed {
		if f.End > needed {
			t.Fatalf("pruned fragment [%d, %d), but hints need the log from %d", f.Begin, f.End, needed)
		}
	}
	waitPruned(t, ctx, journal, removed[len(removed)-1].End)

	// Both kept generations still recover the store.
	for i, h := range []*Hints{after1, after2} {
		var _, dir, _ = play(t, journal, h, Author(0xC0+i))
		if h == after2 {
			sameTree(t, m.dir, dir)
		}
	}
	// Also when reading persisted fragments straight from the store; and a
	// process that cannot open their URLs (first, with no file://
	// transport) reads them through the brokers rather than retrying forever.
	for i, installed := range []bool{false, true} {
		if installed {
			defer client.InstallFileTransport(stack.FragmentsRoot())()
		}
		forgetUnreadableStores() // Probe the store afresh.
		var direct = NewPlayer(stack.Journals(), journal, t.TempDir(), Author(0xC7+i))
		direct.DoNotProxy = true
		direct.FinishAtWriteHead()
		if _, err = direct.Play(ctx, after2); err != nil {
			t.Fatalf("playback reading fragments directly (file transport installed: %v): %v", installed, err)
		}
		sameTree(t, m.dir, direct.dir)
		if direct.direct != installed {
			t.Fatalf("file transport installed: %v, yet the player read directly: %v", installed, direct.direct)
		}
	}

	// Playback from the log's start, or from hints before the compaction,
	// now fails: their content is gone.
	for _, h := range []*Hints{nil, before} {
		var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xD0)
		p.FinishAtWriteHead()
		if _, err = p.Play(ctx, h); err == nil || !strings.Contains(err.Error(), "pruned") {
			t.Fatalf("playback of a pruned log: %v", err)
		}
	}
}

// waitPruned waits until the brokers no longer list fragments of journal
// which end at or before end: they refresh their index from the store.
func waitPruned(t *testing.T, ctx context.Context, journal pb.Journal, end int64) {
	t.Helper()
	for {
		var resp, err = client.ListAllFragments(ctx, stack.Journals(), pb.FragmentsRequest{Journal: journal})
		if err != nil {
			t.Fatal(err)
		}
		var listed bool
		for _, f := range resp.Fragments {
			listed = listed || f.Spec.End <= end
		}
		if !listed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(errors.Join(ctx.Err(), fmt.Errorf("pruned fragments of %s are still listed", journal)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
