package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"

	"github.com/gazconsumer/gazconsumer/internal/progress"
)

// Family is the journals of one name prefix (through the last '/' of
// their names): a journal message's partitions, a consumer's recovery
// logs.
type Family struct {
	Name     string
	Journals []*Journal
	// WriteHeads sums the journals' write heads, and Bytes the bytes of
	// their fragments.
	WriteHeads, Bytes int64
}

// Journal is a journal, as the brokers list it.
type Journal struct {
	Name        pb.Journal
	MessageType string
	ContentType string
	Replication int32
	// Primary is the broker of its primary replica, if assigned.
	Primary string
	// WriteHead is its write head, -1 if unknown.
	WriteHead int64
	// Fragments are its fragments, oldest first; Persisted those of them
	// in a fragment store; Bytes their total length.
	Fragments []pb.Fragment
	Persisted int
	Bytes     int64
	// Err is what could not be read of it.
	Err string
}

// readJournals lists the journals matching selector, in families, with each
// one's write head and fragments. Up to 16 journals are read at once.
func (g *gatherer) readJournals(ctx context.Context, selector pb.LabelSelector) ([]*Family, error) {
	var ctx2, cancel = context.WithTimeout(ctx, 2*g.timeout)
	defer cancel()
	var list, err = client.ListAllJournals(ctx2, g.journals, pb.ListRequest{Selector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing journals: %w", err)
	}
	var journals = make([]*Journal, len(list.Journals))
	var sem = make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, lj := range list.Journals {
		var j = &Journal{
			Name:        lj.Spec.Name,
			MessageType: lj.Spec.LabelSet.ValueOf(labels.MessageType),
			ContentType: lj.Spec.LabelSet.ValueOf(labels.ContentType),
			Replication: lj.Spec.Replication,
			WriteHead:   -1,
		}
		if lj.Route.Primary != -1 {
			j.Primary = lj.Route.Members[lj.Route.Primary].Suffix
		}
		journals[i] = j
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			g.readJournal(ctx2, j)
		})
	}
	wg.Wait()

	var families []*Family
	for _, j := range journals {
		var name = j.Name.String()
		name = name[:strings.LastIndex(name, "/")+1]
		if n := len(families); n == 0 || families[n-1].Name != name {
			families = append(families, &Family{Name: name})
		}
		var f = families[len(families)-1]
		f.Journals = append(f.Journals, j)
		f.WriteHeads += max(0, j.WriteHead)
		f.Bytes += j.Bytes
	}
	slices.SortStableFunc(families, func(a, b *Family) int { return strings.Compare(a.Name, b.Name) })
	return families, nil
}

// readJournal reads the write head and fragments of j.
func (g *gatherer) readJournal(ctx context.Context, j *Journal) {
	var head, err = progress.WriteHead(ctx, g.journals, j.Name)
	if err != nil {
		j.Err = err.Error()
		return
	}
	j.WriteHead = int64(head)
	frags, err := client.ListAllFragments(ctx, g.journals, pb.FragmentsRequest{Journal: j.Name})
	if err != nil {
		j.Err = fmt.Sprintf("listing the fragments of %s: %v", j.Name, err)
		return
	}
	for _, f := range frags.Fragments {
		j.Fragments = append(j.Fragments, f.Spec)
		j.Bytes += int64(f.Spec.End - f.Spec.Begin)
		if f.Spec.BackingStore != "" {
			j.Persisted++
		}
	}
}

// FragmentTime is the modification time of a persisted fragment, or zero.
func FragmentTime(f pb.Fragment) time.Time {
	if f.ModTime == 0 {
		return time.Time{}
	}
	return time.Unix(f.ModTime, 0)
}
