package console

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// sampler takes Readings every interval while the console is watched (a
// page or the series endpoint was asked for within idleAfter), keeps the
// last ones for the charts, and sets each reading's rates from the one
// taken rateWindow before it (or the oldest after).
type sampler struct {
	g         *gatherer
	interval  time.Duration
	keep      int
	idleAfter time.Duration

	watched atomic.Int64 // Unix nanoseconds of the last request.
	take    sync.Mutex   // Held while a reading is taken.
	mu      sync.Mutex
	history []*Reading // Oldest first.
}

// Rates are of the counters' changes over rateWindow (commits come in
// bursts, a transaction at a time), between readings at most maxRateGap
// apart.
const (
	rateWindow = 5 * time.Second
	maxRateGap = 15 * time.Second
)

// run samples until ctx is done.
func (s *sampler) run(ctx context.Context) {
	var ticker = time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if time.Since(time.Unix(0, s.watched.Load())) < s.idleAfter {
			s.sample(ctx)
		}
	}
}

// latest returns the latest reading, taking one if there is none as
// recent as the interval.
func (s *sampler) latest(ctx context.Context) *Reading {
	s.watched.Store(time.Now().UnixNano())
	if r := s.last(); r != nil && time.Since(r.At) < s.interval+s.interval/2 {
		return r
	}
	// Not ended with the request asking for it: the reading is for every
	// viewer (and has a deadline of its own).
	return s.sample(context.WithoutCancel(ctx))
}

// last returns the latest reading, or nil.
func (s *sampler) last() *Reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.history) == 0 {
		return nil
	}
	return s.history[len(s.history)-1]
}

// sample takes a reading, rates it from the previous one, and keeps it.
// Readings are taken one at a time: a caller arriving while one is taken
// waits for it and returns it.
func (s *sampler) sample(ctx context.Context) *Reading {
	var before = time.Now()
	s.take.Lock()
	defer s.take.Unlock()
	if r := s.last(); r != nil && r.At.After(before) {
		return r // Taken while this caller waited.
	}
	var r = s.g.read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.before(r.At.Add(-rateWindow)); prev != nil {
		rate(prev, r)
	}
	s.history = append(s.history, r)
	if len(s.history) > s.keep {
		s.history = append(s.history[:0], s.history[len(s.history)-s.keep:]...)
	}
	return r
}

// before returns the latest reading taken at t or before, or else the
// oldest; nil if there is none.
func (s *sampler) before(t time.Time) *Reading {
	var out *Reading
	for _, r := range s.history {
		if out != nil && r.At.After(t) {
			break
		}
		out = r
	}
	return out
}

// readings returns the readings kept, oldest first.
func (s *sampler) readings() []*Reading {
	s.watched.Store(time.Now().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Reading(nil), s.history...)
}

// rate sets the rates of cur's shards and replicas from prev: the change of
// a counter of a shard's primary, or of the bytes a replica played, over
// the time between the readings. A shard whose primary moved has no rate
// (its counters are of another process).
func rate(prev, cur *Reading) {
	var dt = cur.At.Sub(prev.At).Seconds()
	if dt <= 0 || cur.At.Sub(prev.At) > maxRateGap {
		return
	}
	for _, g := range cur.Groups {
		var pg = prev.group(g.Prefix)
		var known bool
		for _, sh := range g.Shards {
			var ps *Shard
			if pg != nil {
				ps = pg.Shard(sh.ID)
			}
			if ps == nil {
				continue
			}
			if ps.primaryEndpoint == sh.primaryEndpoint && sh.primaryEndpoint != "" && sh.Messages >= ps.Messages && sh.Transactions >= ps.Transactions {
				sh.MsgRate = (sh.Messages - ps.Messages) / dt
				sh.TxnRate = (sh.Transactions - ps.Transactions) / dt
				g.MsgRate, g.TxnRate, known = max(g.MsgRate, 0)+sh.MsgRate, max(g.TxnRate, 0)+sh.TxnRate, true
			}
			for _, rep := range sh.Replicas {
				for _, pr := range ps.Replicas {
					if pr.Endpoint == rep.Endpoint && pr.Played >= 0 && rep.Played >= pr.Played {
						rep.PlayRate = float64(rep.Played-pr.Played) / dt
					}
				}
			}
		}
		if !known {
			g.MsgRate, g.TxnRate = -1, -1
		}
	}
}

// group returns the reading's group of prefix, or nil.
func (r *Reading) group(prefix string) *Group {
	for _, g := range r.Groups {
		if g.Prefix == prefix {
			return g
		}
	}
	return nil
}

// Group returns the reading's group named name, or nil.
func (r *Reading) Group(name string) *Group {
	for _, g := range r.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}
