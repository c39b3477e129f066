package recoverylog

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Player fences with client.Append, which retries an append that fails
// with codes.Unavailable. Should a broker commit the fence append and its
// acknowledgement then be lost, the retry appends the fence again. These
// tests lose the acknowledgement of the player's first fence append (which
// sets AuthorRegister) on the real broker stack, so that the log holds the
// fence twice.
//
// The retry's CheckRegisters (the register before the fence, or none) no
// longer match, so appendFence reads the register again, now the player's
// own author, and appends the fence again: the log holds the fence twice,
// back to back. The player plays the first, skips the second as a copy
// (ErrNotFollowing: its seq is taken), finds it didn't end at the commit it
// was acknowledged, and fences once more after it.

// lossyFenceClient is a journal client which, once, lets the broker commit
// a fence append (one which unions AuthorRegister) and then fails it as
// unavailable, as a lost acknowledgement does.
type lossyFenceClient struct {
	pb.RoutedJournalClient
	mu     sync.Mutex
	lose   int        // Acknowledgements still to lose.
	lost   []logRange // Commits whose acknowledgements were lost.
	fences []logRange // Commits of fence appends, acknowledged or not.
}

func (c *lossyFenceClient) Append(ctx context.Context, opts ...grpc.CallOption) (pb.Journal_AppendClient, error) {
	var s, err = c.RoutedJournalClient.Append(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &lossyFenceStream{Journal_AppendClient: s, c: c}, nil
}

// isFence reports whether req is a fence append: one which unions
// AuthorRegister (appendFence).
func isFence(req *pb.AppendRequest) bool {
	return req.UnionRegisters != nil && len(req.UnionRegisters.ValuesOf(AuthorRegister)) != 0
}

type lossyFenceStream struct {
	pb.Journal_AppendClient
	c     *lossyFenceClient
	fence bool // The append unions AuthorRegister.
	sent  bool // The append's request was sent.
	recvd bool // Its response was received.
}

func (s *lossyFenceStream) SendMsg(m any) error {
	if req, ok := m.(*pb.AppendRequest); ok && !s.sent {
		s.sent = true
		s.fence = isFence(req)
	}
	return s.Journal_AppendClient.SendMsg(m)
}

func (s *lossyFenceStream) RecvMsg(m any) error {
	var err = s.Journal_AppendClient.RecvMsg(m)
	var resp, ok = m.(*pb.AppendResponse)
	if err != nil || !ok || !s.fence || s.recvd {
		return err
	}
	s.recvd = true
	if resp.Status != pb.Status_OK {
		return nil
	}
	var c = s.c
	var commit = logRange{resp.Commit.Begin, resp.Commit.End}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fences = append(c.fences, commit)
	if c.lose == 0 {
		return nil
	}
	c.lose--
	c.lost = append(c.lost, commit)
	_ = s.Journal_AppendClient.RecvMsg(new(pb.AppendResponse)) // Read the stream's EOF.
	return status.Error(codes.Unavailable, "test: acknowledgement of a committed fence lost")
}

// playWithLostFenceAck plays journal from hints into a new directory as
// author, through a client which loses the acknowledgement of the first
// fence append. It checks that the fence committed twice, back to back, and
// that the FSM ends at the write head, and returns where the lost commit lies.
func playWithLostFenceAck(t *testing.T, journal pb.Journal, hints *Hints, author Author) (*FSM, string, logRange) {
	t.Helper()
	var c = &lossyFenceClient{RoutedJournalClient: stack.Journals(), lose: 1}
	var dir = t.TempDir()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = NewPlayer(c, journal, dir, author)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, hints)
	if err != nil {
		t.Fatalf("Play %s with a lost fence acknowledgement: %v", journal, err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("fence appends committed at %v; acknowledgement lost of %v", c.fences, c.lost)
	if len(c.lost) != 1 || len(c.fences) < 2 {
		t.Fatalf("fences %v, lost %v: the fence didn't commit again after its lost acknowledgement; test is vacuous", c.fences, c.lost)
	}
	var lost, retry = c.lost[0], c.fences[1]
	if retry.begin != lost.end || retry.end-retry.begin != lost.end-lost.begin ||
		!bytes.Equal(readLog(t, journal, lost.begin, lost.end), readLog(t, journal, retry.begin, retry.end)) {
		t.Fatalf("the retried fence %v isn't a copy of the lost one %v just after it", retry, lost)
	}
	if fsm.Author() != author {
		t.Fatalf("played FSM's author is %v, not %v", fsm.Author(), author)
	}
	var resp, err2 = client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal})
	if err2 != nil {
		t.Fatal(err2)
	} else if fsm.NextOffset() != resp.Commit.End {
		t.Fatalf("played FSM ends at %d, not at the write head %d", fsm.NextOffset(), resp.Commit.End)
	} else if v := resp.Registers.ValuesOf(AuthorRegister); len(v) != 1 || v[0] != author.String() {
		t.Fatalf("%s is %v after the fence, not just %s", AuthorRegister, v, author)
	}
	return fsm, dir, lost
}

// A fence append which commits twice, its first acknowledgement lost,
// doesn't fail playback: the player finishes, fenced, with its directory
// what the deposed recorder's was; a recorder continues from its FSM; and
// the log plays back, from that recorder's hints and from its start, to
// what the recorder's directory holds.
func TestFenceWithLostAcknowledgement(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prior     bool // A recorder wrote the log before.
		fromHints bool // The player plays from its hints.
	}{
		{"fresh log", false, false},
		{"take over from hints", true, true},
		{"take over from the start", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var journal = newLog(t)
			var hints *Hints
			var priorDir string
			if tc.prior {
				var m = newMirror(t, journal, nil, 0xA1)
				m.create("one")
				m.write("one", []byte("written by the deposed recorder"), -1)
				m.create("d/two")
				m.write("d/two", bytes.Repeat([]byte("two"), 5000), -1)
				m.property("CURRENT", []byte("v1"))
				var h = m.hints()
				if tc.fromHints {
					hints = h
				}
				priorDir = m.dir
			}

			var fsm, dir, lost = playWithLostFenceAck(t, journal, hints, 0xB2)
			if tc.prior {
				sameTree(t, priorDir, dir)
			}

			var ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			var rec, err = NewRecorder(journal, fsm, 0xB2, dir, client.NewAppendService(ctx, stack.Journals()))
			if err != nil {
				t.Fatal(err)
			}
			var m = &mirror{t: t, dir: dir, rec: rec, fns: make(map[string]Fnode)}
			m.create("three")
			m.write("three", []byte("written after the twice-committed fence"), -1)
			m.property("CURRENT", []byte("v2"))
			var after = m.lastCommit()
			if after.begin < lost.end {
				t.Fatalf("the new recorder's append %v lies before the end of the fence %v", after, lost)
			}
			var h = m.hints()
			checkHintsAtHead(t, journal, h)
			checkSegmentsPast(t, h, lost)

			var _, fromHints, _ = play(t, journal, h, 0xC3)
			sameTree(t, m.dir, fromHints)
			var _, fromStart, _ = play(t, journal, nil, 0xC4)
			sameTree(t, m.dir, fromStart)
		})
	}
}

// fenceReadsClient is a journal client which counts the reads started after
// a fence append (isFence) was sent.
type fenceReadsClient struct {
	pb.RoutedJournalClient
	mu     sync.Mutex
	fenced bool // A fence append was started.
	after  int  // Reads started since.
}

func (c *fenceReadsClient) Read(ctx context.Context, req *pb.ReadRequest, opts ...grpc.CallOption) (pb.Journal_ReadClient, error) {
	c.mu.Lock()
	if c.fenced {
		c.after++
	}
	c.mu.Unlock()
	return c.RoutedJournalClient.Read(ctx, req, opts...)
}

func (c *fenceReadsClient) Append(ctx context.Context, opts ...grpc.CallOption) (pb.Journal_AppendClient, error) {
	var s, err = c.RoutedJournalClient.Append(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &fenceSpyStream{Journal_AppendClient: s, c: c}, nil
}

type fenceSpyStream struct {
	pb.Journal_AppendClient
	c *fenceReadsClient
}

func (s *fenceSpyStream) SendMsg(m any) error {
	if req, ok := m.(*pb.AppendRequest); ok && isFence(req) {
		s.c.mu.Lock()
		s.c.fenced = true
		s.c.mu.Unlock()
	}
	return s.Journal_AppendClient.SendMsg(m)
}

// A fence that lands right after the history played is applied as
// appended, without a read of it; a recorder goes on from the FSM, and the
// log plays back to the recorder's files, through both fences.
func TestFenceAtTheHeadIsNotReadBack(t *testing.T) {
	var journal = newLog(t)
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var m = newMirror(t, journal, nil, 0xE1) // Fences the log first.
	m.create("a")
	m.write("a", []byte("written before the takeover"), -1)
	m.check(m.rec.SyncAll(ctx))

	for _, author := range []Author{0xE2, 0xE3} {
		var c = &fenceReadsClient{RoutedJournalClient: stack.Journals()}
		var p = NewPlayer(c, journal, t.TempDir(), author)
		p.FinishAtWriteHead()
		var fsm, err = p.Play(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		var fenced, after = c.fenced, c.after
		c.mu.Unlock()
		if !fenced {
			t.Fatal("no fence append was seen: the test is vacuous")
		} else if after != 0 {
			t.Errorf("author %v: %d reads after the fence append, want none", author, after)
		}
		var resp, err2 = client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal})
		if err2 != nil {
			t.Fatal(err2)
		} else if fsm.Author() != author || fsm.NextOffset() != resp.Commit.End {
			t.Fatalf("author %v: FSM of author %v ends at %d; the write head is %d", author, fsm.Author(), fsm.NextOffset(), resp.Commit.End)
		}
		if author == 0xE3 {
			// The last author records on from its FSM; a playback from
			// the log's start holds what it wrote.
			var rec, err = NewRecorder(journal, fsm, author, p.dir, client.NewAppendService(ctx, stack.Journals()))
			if err != nil {
				t.Fatal(err)
			}
			var next = &mirror{t: t, dir: p.dir, rec: rec, fns: make(map[string]Fnode)}
			next.create("b")
			next.write("b", []byte("written after it"), -1)
			next.check(rec.SyncAll(ctx))
			var _, dir, _ = play(t, journal, nil, 0xE4)
			sameTree(t, p.dir, dir)
		}
	}
}
