package main

import (
	"fmt"
	"maps"
	"slices"
)

// parentOf returns the parent of child shard q.
func parentOf(q string) string {
	var i = slices.Index(children, q)
	return parents[i%len(parents)]
}

// serveCreated is the worst child's time from its spec's creation to
// PRIMARY, over its parent's recovery time: the command's steps before it
// created the spec left out.
func (r *result) serveCreated() float64 {
	var w float64
	for _, q := range children {
		w = max(w, r.serveCreate[q].Seconds()/r.recovery[parentOf(q)].Seconds())
	}
	return w
}

// ratios are a repetition's figures of the three goals: the worst child's.
func (r *result) ratios() (serve, read, rate float64) {
	for _, q := range children {
		serve = max(serve, r.serve[q].Seconds()/r.recovery[parentOf(q)].Seconds())
		read = max(read, float64(r.forkRead[q])/float64(r.splitLive[parentOf(q)]))
	}
	return serve, read, r.rateDuring / r.rateBefore
}

// dropRatio is the consumption while the shards drop what they no longer
// own, after the command, over that before the split: the rescale's end.
func (r *result) dropRatio() float64 { return r.rateDrop / r.rateBefore }

func (r *result) print() {
	for _, p := range parents {
		fmt.Printf("  parent %s: recovered in %6.2fs, read %s of a state of %s; live state at the split %s (%s as of its newest hints)\n",
			p, r.recovery[p].Seconds(), mib(r.recoveryRead[p]), mib(r.liveRecovery[p]), mib(r.live[p]), mib(r.liveHints[p]))
	}
	for _, q := range children {
		var how = fmt.Sprintf("its fork read %s of the parent's log in %.2fs", mib(r.forkRead[q]), r.forkTook[q].Seconds())
		if r.forkLocal[q] {
			how = fmt.Sprintf("it forked from its parent's store, in its member, in %.2fs (no log read)", r.forkTook[q].Seconds())
		}
		fmt.Printf("  child  %s: PRIMARY %6.2fs after the command's start (%.2fs after its spec's creation); %s\n",
			q, r.serve[q].Seconds(), r.serveCreate[q].Seconds(), how)
	}
	for _, p := range slices.Sorted(maps.Keys(r.dropTook)) {
		var halfway = "not reported (its log is not at the debug level)"
		if h, ok := r.dropHalfway[p]; ok {
			halfway = fmt.Sprintf("%.2f (0.5 if its progress is told evenly)", h)
		}
		fmt.Printf("  parent %s: dropped what it no longer owns in %.2fs; its progress halfway through that time: %s\n", p, r.dropTook[p].Seconds(), halfway)
	}
	fmt.Printf("  split: the command ran %.2fs; input yet to consume %s as it started\n", r.split.Seconds(), mib(r.lagSplit))
	if r.ranOut {
		fmt.Println("  (the backlog ran out before the rate after the split was taken: the rates during and after it may be the load's, lower bounds of the consumer's; use more -messages)")
	}
	fmt.Printf("  consumption (events/s): before %.0f, during %.0f (lowest over 1s %.0f), while the shards drop what they no longer own %.0f (for %.2fs after the command), while their stores compact %.0f (for %.2fs more), after %.0f (%.2f of before); messages read/s (metric): before %.0f, during %.0f; load published at %.0f/s\n",
		r.rateBefore, r.rateDuring, r.minDuring, r.rateDrop, r.drop.Seconds(), r.rateCompact, r.compact.Seconds(), r.rateAfter, r.rateAfter/r.rateBefore, r.readBefore, r.readDuring, r.published)
	fmt.Printf("  ledger member CPU s/s: before %.2f, during %.2f, after %.2f; CPU ms a thousand events: before %.1f, after %.1f\n",
		r.memberCPUBefore, r.memberCPUDuring, r.memberCPUAfter, 1e6*r.memberCPUBefore/r.rateBefore, 1e6*r.memberCPUAfter/r.rateAfter)
	var serve, read, rate = r.ratios()
	fmt.Printf("  ratios: child serve / parent recovery %.2f (goal ≤ 2; %.2f from its spec's creation); fork read / parent live %.2f (goal ≤ 1.2); rate during / before %.2f (goal ≥ 0.5); while dropping / before %.2f\n", serve, r.serveCreated(), read, rate, r.dropRatio())
	fmt.Printf("  check: %s\n", r.check)
}

// summarize prints the medians and ranges of the repetitions' figures.
func summarize(rs []*result) {
	var col = func(f func(*result) float64) spread {
		var v []float64
		for _, r := range rs {
			v = append(v, f(r))
		}
		return spreadOf(v)
	}
	var worst = func(shards []string, f func(*result, string) float64) func(*result) float64 {
		return func(r *result) float64 {
			var w float64
			for _, s := range shards {
				w = max(w, f(r, s))
			}
			return w
		}
	}
	fmt.Printf("\nsummary: median (range) of %d repetitions; of two shards, the greater\n", len(rs))
	var row = func(name string, s spread, unit string) { fmt.Printf("%-58s %s %s\n", name, s, unit) }
	row("parent recovery: process start → PRIMARY", col(worst(parents, func(r *result, p string) float64 { return r.recovery[p].Seconds() })), "s")
	row("parent recovery: bytes read", col(worst(parents, func(r *result, p string) float64 { return float64(r.recoveryRead[p]) / (1 << 20) })), "MiB")
	row("parent live state when killed (its store's files)", col(worst(parents, func(r *result, p string) float64 { return float64(r.liveRecovery[p]) / (1 << 20) })), "MiB")
	row("parent live state at the split (its store's files)", col(worst(parents, func(r *result, p string) float64 { return float64(r.live[p]) / (1 << 20) })), "MiB")
	row("parent live state at the split (its newest hints)", col(worst(parents, func(r *result, p string) float64 { return float64(r.liveHints[p]) / (1 << 20) })), "MiB")
	row("child: command start → PRIMARY", col(worst(children, func(r *result, q string) float64 { return r.serve[q].Seconds() })), "s")
	row("child: spec created → PRIMARY", col(worst(children, func(r *result, q string) float64 { return r.serveCreate[q].Seconds() })), "s")
	row("child: fork (playback of parent's log + Fork, or its store read)", col(worst(children, func(r *result, q string) float64 { return r.forkTook[q].Seconds() })), "s")
	row("child: fork bytes read", col(worst(children, func(r *result, q string) float64 { return float64(r.forkRead[q]) / (1 << 20) })), "MiB")
	row("the command's run", col(func(r *result) float64 { return r.split.Seconds() }), "s")
	row("consumption before the split", col(func(r *result) float64 { return r.rateBefore }), "events/s")
	row("consumption during the split", col(func(r *result) float64 { return r.rateDuring }), "events/s")
	row("consumption during the split, lowest over 1 s", col(func(r *result) float64 { return r.minDuring }), "events/s")
	row("the drops of what shards no longer own, after the command", col(func(r *result) float64 { return r.drop.Seconds() }), "s")
	row("consumption while the shards drop", col(func(r *result) float64 { return r.rateDrop }), "events/s")
	row("the stores' compactions, after the drops", col(func(r *result) float64 { return r.compact.Seconds() }), "s")
	row("consumption while the stores compact", col(func(r *result) float64 { return r.rateCompact }), "events/s")
	row("consumption after the compactions", col(func(r *result) float64 { return r.rateAfter }), "events/s")
	row("consumption after the compactions / before the split", col(func(r *result) float64 { return r.rateAfter / r.rateBefore }), "")
	row("messages read (metric) before the split", col(func(r *result) float64 { return r.readBefore }), "/s")
	row("messages read (metric) during the split", col(func(r *result) float64 { return r.readDuring }), "/s")
	row("load published at (the member dead from the warm-up's end)", col(func(r *result) float64 { return r.published }), "messages/s")
	row("ledger member CPU before the split", col(func(r *result) float64 { return r.memberCPUBefore }), "s/s")
	row("ledger member CPU during the split", col(func(r *result) float64 { return r.memberCPUDuring }), "s/s")
	row("ledger member CPU after the compactions", col(func(r *result) float64 { return r.memberCPUAfter }), "s/s")
	row("ledger member CPU a thousand events, after / before", col(func(r *result) float64 {
		return (r.memberCPUAfter / r.rateAfter) / (r.memberCPUBefore / r.rateBefore)
	}), "")
	row("input yet to consume as the split starts", col(func(r *result) float64 { return float64(r.lagSplit) / (1 << 20) }), "MiB")

	fmt.Println("\ngoals (issue 27), of the worst child of each repetition:")
	var serve = col(func(r *result) float64 { s, _, _ := r.ratios(); return s })
	var read = col(func(r *result) float64 { _, x, _ := r.ratios(); return x })
	var rate = col(func(r *result) float64 { _, _, x := r.ratios(); return x })
	fmt.Printf("%-58s %s  goal ≤ 2    %s\n", "child serve (command start) / parent recovery", serve, verdict(serve.hi <= 2))
	var created = col(func(r *result) float64 { return r.serveCreated() })
	fmt.Printf("%-58s %s  goal ≤ 2    %s\n", "child serve (spec created) / recovery", created, verdict(created.hi <= 2))
	fmt.Printf("%-58s %s  goal ≤ 1.2  %s\n", "child fork bytes read / parent live state (greater)", read, verdict(read.hi <= 1.2))
	fmt.Printf("%-58s %s  goal ≥ 0.5  %s\n", "consumption during / before the split", rate, verdict(rate.lo >= 0.5))
	var drop = col(func(r *result) float64 { return r.dropRatio() })
	fmt.Printf("%-58s %s  goal ≥ 0.5  %s\n", "consumption while the shards drop / before the split", drop, verdict(drop.lo >= 0.5))

	fmt.Println("\nCPU seconds, all told:")
	var names = map[string]bool{}
	for _, r := range rs {
		for n := range r.cpu {
			names[n] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		row(n, col(func(r *result) float64 { return r.cpu[n] }), "s")
	}
	fmt.Println("every repetition's answer was checked: bankctl check OK")
}

func verdict(met bool) string {
	if met {
		return "met (every repetition)"
	}
	return "NOT met (in some repetition)"
}

// spread is a median with the least and greatest values it is of.
type spread struct{ median, lo, hi float64 }

func (s spread) String() string { return fmt.Sprintf("%8.2f (%.2f-%.2f)", s.median, s.lo, s.hi) }

func spreadOf(v []float64) spread {
	return spread{medianOf(v), slices.Min(v), slices.Max(v)}
}

func medianOf(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
