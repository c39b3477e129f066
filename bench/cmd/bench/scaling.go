package main

import (
	"context"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The scaling measure (-scaling): throughput and CPU a message of ours and
// the anchor as the key space grows (-scaling.keys, at -scaling.partitions
// shards) and as the shards of one member grow (-scaling.shards, at
// -scaling.shardkeys keys), each point a workload of -scaling.messages
// messages measured as a throughput workload is (a stack of its own, every
// side in every repetition, answers checked). It prints a table of each
// sweep and, with -plots DIR, draws each as a PNG in DIR.

// scalingConfig is the scaling measure's flags.
type scalingConfig struct {
	enabled    bool
	messages   int
	keys       []int // Of the key sweep.
	partitions int   // Of the key sweep.
	shards     []int // Of the shard sweep.
	shardKeys  int   // Of the shard sweep.
	sides      []string
	plots      string // Directory of the PNGs, if any.
}

// parseInts parses a list of positive integers, such as 10000,100000.
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var v, err = strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// scalingPoint is a side's figures at one point of a sweep.
type scalingPoint struct {
	x       int // Keys, or shards.
	side    string
	rate    spread // Messages a second.
	cpuPerM spread // CPU seconds a million messages.
}

// sweep is the points of one sweep.
type sweep struct {
	name, xLabel, file string
	points             []scalingPoint
}

// scaling runs both sweeps and prints and plots them.
func scaling(ctx context.Context, c config) error {
	var s = c.scaling
	var keySweep = sweep{name: fmt.Sprintf("keys (%d shards)", s.partitions), xLabel: "keys", file: "benchmarks-scaling-keys.png"}
	for _, keys := range s.keys {
		var w = workloadSpec{name: fmt.Sprintf("keys-%d", keys), messages: s.messages, partitions: s.partitions, keys: keys}
		var points, err = scalingAt(ctx, c, w, keys)
		if err != nil {
			return fmt.Errorf("scaling, %d keys: %w", keys, err)
		}
		keySweep.points = append(keySweep.points, points...)
	}
	var shardSweep = sweep{name: fmt.Sprintf("shards of a member (%d keys)", s.shardKeys), xLabel: "shards", file: "benchmarks-scaling-shards.png"}
	for _, shards := range s.shards {
		var w = workloadSpec{name: fmt.Sprintf("shards-%d", shards), messages: s.messages, partitions: shards, keys: s.shardKeys}
		var points, err = scalingAt(ctx, c, w, shards)
		if err != nil {
			return fmt.Errorf("scaling, %d shards: %w", shards, err)
		}
		shardSweep.points = append(shardSweep.points, points...)
	}
	for _, sw := range []sweep{keySweep, shardSweep} {
		printSweep(c, sw)
		if s.plots != "" {
			var path = filepath.Join(s.plots, sw.file)
			if err := plotSweep(sw, s.messages, c.reps, path); err != nil {
				return fmt.Errorf("plotting %s: %w", sw.name, err)
			}
			fmt.Printf("  plotted to %s\n", path)
		}
	}
	return nil
}

// scalingAt measures every side of the scaling measure on w, whose point
// of its sweep is x.
func scalingAt(ctx context.Context, c config, w workloadSpec, x int) ([]scalingPoint, error) {
	var runs []workload.Run
	for rep := 1; rep <= c.reps; rep++ {
		for _, side := range c.scaling.sides {
			runs = append(runs, workload.Run{Side: side, Rep: rep, MinTxn: c.minTxn, MaxTxn: c.maxTxn})
		}
	}
	var got = make(map[string][]sample)
	var _, err = withStack(ctx, c, w.name, w.partitions, runs, func(env stackEnv) ([]matrixRow, error) {
		fmt.Printf("\nscaling, %s: %d messages, %d keys, %d partitions and shards\n", w.name, w.messages, w.keys, w.partitions)
		var heads, want, err = fill(ctx, env.jc, w)
		if err != nil {
			return nil, err
		}
		for rep := 1; rep <= c.reps; rep++ {
			for k := range c.scaling.sides {
				var side = c.scaling.sides[(k+rep-1)%len(c.scaling.sides)]
				var s, err = consume(ctx, c, env, workload.Run{Side: side, Rep: rep, MinTxn: c.minTxn, MaxTxn: c.maxTxn}, w.name, heads, want, "")
				if err != nil {
					return nil, fmt.Errorf("%s, repetition %d: %w", side, rep, err)
				}
				fmt.Printf("  rep %d %-8s %8.3fs  %10.0f msgs/s  cpu %6.2fs\n", rep, side, s.seconds, float64(w.messages)/s.seconds, s.cpuSeconds)
				got[side] = append(got[side], s)
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	var perM = float64(w.messages) / 1e6
	var points []scalingPoint
	for _, side := range c.scaling.sides {
		var rates, cpus []float64
		for _, s := range got[side] {
			rates = append(rates, float64(w.messages)/s.seconds)
			cpus = append(cpus, s.cpuSeconds/perM)
		}
		points = append(points, scalingPoint{x: x, side: side, rate: spreadOf(rates), cpuPerM: spreadOf(cpus)})
	}
	return points, nil
}

// printSweep prints a sweep as a Markdown table, with ours' figures
// against the anchor's at each point.
func printSweep(c config, sw sweep) {
	fmt.Printf("\nscaling with %s: %d messages a point; medians of %d repetitions (range)\n\n", sw.name, c.scaling.messages, c.reps)
	fmt.Printf("| %s | side | msgs/s | CPU s/M msgs | CPU ours/anchor |\n| ---: | --- | ---: | ---: | ---: |\n", sw.xLabel)
	var cpuOf = make(map[string]float64)
	for _, p := range sw.points {
		cpuOf[fmt.Sprint(p.x, p.side)] = p.cpuPerM.median
	}
	for _, p := range sw.points {
		var vs string
		if a, ok := cpuOf[fmt.Sprint(p.x, "anchor")]; ok && p.side != "anchor" {
			vs = fmt.Sprintf("%.2f", p.cpuPerM.median/a)
		}
		fmt.Printf("| %d | %s | %s | %s | %s |\n", p.x, p.side, fmtSpread(p.rate, "%.0f"), fmtSpread(p.cpuPerM, "%.2f"), vs)
	}
}

// plotSweep draws a sweep as a PNG at path: throughput above, CPU a
// million messages below, a line a side through its medians, with bars
// of their ranges; the sweep's axis is logarithmic.
func plotSweep(sw sweep, messages, reps int, path string) error {
	var sides []string
	for _, p := range sw.points {
		if !slices.Contains(sides, p.side) {
			sides = append(sides, p.side)
		}
	}
	var colors = map[string]color.Color{
		"ours":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		"anchor": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	}
	// A tick at every point of the sweep, on a logarithmic axis.
	var ticks plot.ConstantTicks
	for _, p := range sw.points {
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(p.x) }) {
			ticks = append(ticks, plot.Tick{Value: float64(p.x), Label: humanCount(p.x)})
		}
	}
	var panel = func(title, yLabel string, value func(scalingPoint) spread) (*plot.Plot, error) {
		var p = plot.New()
		p.Title.Text = title
		p.X.Label.Text = sw.xLabel
		p.Y.Label.Text = yLabel
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, ticks
		p.Y.Min = 0
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		for i, side := range sides {
			var pts errPoints
			for _, pt := range sw.points {
				if pt.side == side {
					var v = value(pt)
					pts = append(pts, errPoint{x: float64(pt.x), y: v.median, lo: v.median - v.lo, hi: v.hi - v.median})
				}
			}
			var line, points, err = plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			var c, ok = colors[side]
			if !ok {
				c = color.Gray{Y: uint8(60 * i)}
			}
			line.Color, points.Color = c, c
			bars, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, err
			}
			bars.Color = c
			p.Add(line, points, bars)
			p.Legend.Add(side, line, points)
		}
		return p, nil
	}
	rate, err := panel(fmt.Sprintf("throughput as %s grow (%d messages, median of %d)", sw.name, messages, reps), "messages a second",
		func(p scalingPoint) spread { return p.rate })
	if err != nil {
		return err
	}
	cpu, err := panel("CPU a message", "CPU seconds a million messages", func(p scalingPoint) spread { return p.cpuPerM })
	if err != nil {
		return err
	}
	var img = vgimg.New(vg.Points(640), vg.Points(720))
	var dc = draw.New(img)
	var tiles = draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Points(12), PadY: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	var canvases = plot.Align([][]*plot.Plot{{rate}, {cpu}}, tiles, dc)
	rate.Draw(canvases[0][0])
	cpu.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err = (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// errPoint is a median with the distances to its range's ends.
type errPoint struct{ x, y, lo, hi float64 }

// errPoints are the points of a line, with their ranges as error bars.
type errPoints []errPoint

func (p errPoints) Len() int                         { return len(p) }
func (p errPoints) XY(i int) (float64, float64)      { return p[i].x, p[i].y }
func (p errPoints) YError(i int) (low, high float64) { return p[i].lo, p[i].hi }

// humanCount is n as 10k, 1M and the like.
func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
