package recoverylog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// A player with DoNotProxy reads persisted fragments of its log from their
// store, through the URLs brokers sign for them. Were the process unable to
// open those URLs (a file:// store without client.InstallFileTransport, a
// cloud store beyond its network), its reads would retry forever: so each
// playback first probes one persisted fragment of its log, and reads through
// the brokers if that fails. The process remembers a store it could not
// read from for a while, so that the playbacks of its other logs neither
// wait for the probe's open again nor each log a warning.

const (
	// probePages bounds the pages of the log's fragment listing a probe
	// looks through for a persisted fragment. Each page holds one fragment:
	// brokers sign a URL for every persisted fragment they list, which
	// some stores do with a call to a signing service (GCS without a
	// private key), so a probe lists no more than it needs.
	probePages = 4
	// probeRetry is how long a process that could not open the URLs of a
	// store reads that store's fragments through brokers before it probes
	// the store again.
	probeRetry = 5 * time.Minute
	// probeSignatureTTL is the life of the URL a probe opens.
	probeSignatureTTL = time.Minute
)

var (
	// probeTimeout bounds a probe's open of a fragment's URL: the open of
	// a store the process has no route to would otherwise take as long as
	// the system's TCP connect. A variable for tests.
	probeTimeout = 10 * time.Second
	// openFragmentURL opens a probed fragment: client.OpenFragmentURL,
	// but for tests.
	openFragmentURL = client.OpenFragmentURL
	// unreadable holds the stores this process could not read fragments
	// from, with when it last found so.
	unreadable = struct {
		sync.Mutex
		since map[pb.FragmentStore]time.Time
	}{since: make(map[pb.FragmentStore]time.Time)}
)

// probe sets whether the player reads fragments from their stores itself:
// if DoNotProxy, unless this process can't.
func (p *Player) probe(ctx context.Context) error {
	if p.direct = p.DoNotProxy; !p.direct {
		return nil
	}
	var frag, err = p.persistedFragment(ctx)
	if err == nil && frag != nil {
		var store = frag.Spec.BackingStore
		if at, ok := unreadableSince(store, time.Now()); ok {
			p.direct = false
			slog.Debug("recovery log: reading fragments through brokers; this process could not read them from their store",
				"journal", p.journal, "store", store, "found", at)
			return nil
		}
		var pctx, cancel = context.WithTimeout(ctx, probeTimeout)
		err = openProbe(pctx, frag)
		cancel()
		if err != nil && ctx.Err() == nil {
			markUnreadable(store, time.Now())
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %s: %w", probeTimeout, err)
			} else if u, perr := url.Parse(string(store)); perr == nil && u.Scheme == "file" {
				err = fmt.Errorf("%w (a file:// store is read directly only by a process given its root)", err)
			}
			err = fmt.Errorf("opening fragment %s of store %s: %w", frag.Spec.ContentPath(), store, err)
		} else if err == nil {
			markReadable(store)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("playing %s: %w", p.journal, ctx.Err())
	} else if err != nil {
		slog.Warn("recovery log: this process cannot read fragments from their store; reading them through brokers",
			"journal", p.journal, "retryAfter", probeRetry, "err", err)
		p.direct = false
	}
	return nil
}

// persistedFragment returns the first persisted fragment of the log's
// first probePages, with a URL signed for it, or nil if none is: nothing
// of the log is persisted yet, and brokers serve what there is.
func (p *Player) persistedFragment(ctx context.Context) (*pb.FragmentsResponse__Fragment, error) {
	var ttl = probeSignatureTTL
	var req = pb.FragmentsRequest{Journal: p.journal, PageLimit: 1, SignatureTTL: &ttl}
	var routed = pb.WithDispatchItemRoute(ctx, p.jc, p.journal.String(), false)
	for range probePages {
		var resp, err = p.jc.ListFragments(routed, &req)
		if err == nil {
			err = resp.Validate()
		}
		if err == nil && resp.Status != pb.Status_OK {
			err = errors.New(resp.Status.String())
		}
		if err != nil {
			return nil, fmt.Errorf("listing fragments: %w", err)
		}
		for i := range resp.Fragments {
			if resp.Fragments[i].SignedUrl != "" {
				return &resp.Fragments[i], nil
			}
		}
		if resp.NextPageToken == 0 {
			break
		}
		req.NextPageToken = resp.NextPageToken
	}
	return nil, nil
}

// openProbe opens frag through its signed URL, and reads its first byte.
func openProbe(ctx context.Context, frag *pb.FragmentsResponse__Fragment) error {
	var fr, err = openFragmentURL(ctx, frag.Spec, frag.Spec.Begin, frag.SignedUrl)
	if err != nil {
		return err
	}
	var b [1]byte
	if _, err = fr.Read(b[:]); err != nil && frag.Spec.End > frag.Spec.Begin {
		fr.Close()
		return fmt.Errorf("reading: %w", err)
	}
	return fr.Close()
}

// unreadableSince returns when this process last found it could not read
// fragments from store, if it was less than probeRetry before now.
func unreadableSince(store pb.FragmentStore, now time.Time) (time.Time, bool) {
	unreadable.Lock()
	defer unreadable.Unlock()
	var at, ok = unreadable.since[store]
	if ok && now.Sub(at) >= probeRetry {
		delete(unreadable.since, store)
		return time.Time{}, false
	}
	return at, ok
}

// markUnreadable records that this process could not read fragments from
// store at time at.
func markUnreadable(store pb.FragmentStore, at time.Time) {
	unreadable.Lock()
	defer unreadable.Unlock()
	unreadable.since[store] = at
}

// markReadable records that this process read a fragment from store.
func markReadable(store pb.FragmentStore) {
	unreadable.Lock()
	defer unreadable.Unlock()
	delete(unreadable.since, store)
}
