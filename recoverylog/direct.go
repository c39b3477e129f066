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
// playback first probes the fragment it reads first, and reads through the
// brokers unless that one is persisted and the probe opens it. The process
// remembers a store it could not read from for a while, so that the
// playbacks of its other logs neither wait for the probe's open again nor
// each log a warning.

const (
	// probeRetry is how long a process that could not open the URLs of a
	// store reads that store's fragments through brokers before it probes
	// the store again.
	probeRetry = 5 * time.Minute
	// probeRoutes bounds the reads of a probe that find their broker is
	// not one of the log's (each updates the route it follows).
	probeRoutes = 3
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
func (p *Player) probe(ctx context.Context, hints *Hints) (err error) {
	defer func() {
		if err != nil {
			return
		} else if p.direct {
			playbacks.WithLabelValues("store").Inc()
		} else {
			playbacks.WithLabelValues("brokers").Inc()
		}
	}()
	if p.direct = p.DoNotProxy; !p.direct {
		return nil
	}
	first, err := p.fragmentAt(ctx, firstOffset(p.journal, hints))
	if err != nil && ctx.Err() == nil {
		// The brokers will say so again, to the playback.
		slog.Warn("recovery log: could not read the metadata of the fragment a playback reads first; reading fragments through brokers",
			"journal", p.journal, "err", err)
		p.direct = false
		return nil
	} else if err == nil && first == nil {
		// Were a later fragment persisted meanwhile (or a broker newly
		// handed the log to hold only its persisted copy), the brokers
		// would answer a read which may not be proxied with its URL,
		// which the process may be unable to open.
		slog.Debug("recovery log: the fragment a playback reads first is not persisted; reading fragments through brokers",
			"journal", p.journal)
		p.direct = false
		return nil
	} else if err == nil {
		var store = first.Fragment.BackingStore
		if at, ok := unreadableSince(store, time.Now()); ok {
			p.direct = false
			slog.Debug("recovery log: reading fragments through brokers; this process could not read them from their store",
				"journal", p.journal, "store", store, "found", at)
			return nil
		}
		var pctx, cancel = context.WithTimeout(ctx, probeTimeout)
		err = openProbe(pctx, first)
		cancel()
		if err != nil && ctx.Err() == nil {
			markUnreadable(store, time.Now())
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no answer within %s: %w", probeTimeout, err)
			} else if u, perr := url.Parse(string(store)); perr == nil && u.Scheme == "file" {
				err = fmt.Errorf("%w (a file:// store is read directly only by a process given its root)", err)
			}
			err = fmt.Errorf("opening fragment %s of store %s: %w", first.Fragment.ContentPath(), store, err)
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

// firstOffset returns the offset of the log which a playback from hints
// reads first.
func firstOffset(journal pb.Journal, hints *Hints) int64 {
	if hints == nil || hints.Log != journal.String() || validateHints(hints) != nil {
		return 0 // Played from the log's start, or not played at all.
	} else if ranges := hintedRanges(hints); len(ranges) != 0 {
		return ranges[0].FirstOffset
	}
	return hints.NextOffset
}

// fragmentAt returns the fragment of the log at offset, with the URL
// brokers signed for it (one, where a listing of the log's fragments would
// have them sign one for each: on some stores a call to a signing service
// each, as GCS's without a private key), or nil if it's not persisted or
// not yet served. (For the fragment a playback reads first, nothing then
// tells whether the process can read the log's store.)
func (p *Player) fragmentAt(ctx context.Context, offset int64) (*pb.ReadResponse, error) {
	var ctx2, cancel = context.WithCancel(ctx)
	defer cancel() // Ends the read's stream.
	for range probeRoutes {
		var r = client.NewReader(ctx2, p.jc, pb.ReadRequest{
			Journal:      p.journal,
			Offset:       offset,
			MetadataOnly: true,
			DoNotProxy:   true,
		})
		var _, err = r.Read(nil)
		switch {
		case err == nil, errors.Is(err, client.ErrOffsetJump):
			if r.Response.Fragment == nil || r.Response.FragmentUrl == "" {
				return nil, nil
			}
			return &r.Response, nil
		case errors.Is(err, client.ErrOffsetNotYetAvailable):
			return nil, nil // Nothing there yet.
		case errors.Is(err, client.ErrNotJournalBroker):
			continue // Read again, by the route the broker gave.
		default:
			return nil, fmt.Errorf("reading the fragment at offset %d: %w", offset, err)
		}
	}
	return nil, fmt.Errorf("reading the fragment at offset %d: %w", offset, client.ErrNotJournalBroker)
}

// openProbe opens the fragment of resp through its signed URL, and reads
// its first byte.
func openProbe(ctx context.Context, resp *pb.ReadResponse) error {
	var frag = resp.Fragment
	var fr, err = openFragmentURL(ctx, *frag, frag.Begin, resp.FragmentUrl)
	if err != nil {
		return err
	}
	var b [1]byte
	if _, err = fr.Read(b[:]); err != nil && frag.End > frag.Begin {
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
