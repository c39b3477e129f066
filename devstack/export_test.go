package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	pb "go.gazette.dev/core/broker/protocol"
)

// SetChooseEtcdPort replaces how Start chooses etcd's port until restore is
// called.
func SetChooseEtcdPort(choose func() (int, error)) (restore func()) {
	var prev = chooseEtcdPort
	chooseEtcdPort = choose
	return func() { chooseEtcdPort = prev }
}

// WriteAppendLogSegment writes a segment of the append log of the stack
// directory dir, numbered seq, holding an append of content to journal at
// begin: as a run killed after logging it, acknowledged or not, leaves it.
func WriteAppendLogSegment(dir string, seq int, journal pb.Journal, begin pb.Offset, content string) error {
	var logDir = filepath.Join(dir, "appendlog")
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return err
	}
	var l = &appendLog{dir: logDir, seq: seq - 1, segmentSize: appendLogSegmentSize}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.rotateLocked(); err != nil {
		return err
	}
	var rec = appendRecord{Journal: journal, Begin: begin, End: begin + int64(len(content)), Content: []byte(content)}
	if err := l.writeLocked(rec, encodeAppendRecord(rec)); err != nil {
		return err
	}
	if name := l.f.Name(); name != filepath.Join(logDir, fmt.Sprintf("%012d.log", seq)) {
		return fmt.Errorf("wrote %s", name)
	}
	return l.f.Close()
}

// PersistedEnd is the offset through which the fragment store holds all of
// journal's content, as the append log's pruning asks it.
func (s *Stack) PersistedEnd(ctx context.Context, journal pb.Journal) (pb.Offset, error) {
	return s.persistedEnd(ctx, journal)
}
