// Command membudget measures the memory of a member's RocksDB stores with
// and without a shared memory budget (rocks.Budget), side by side:
//
//	membudget [-shards 16] [-rows 100000] [-value 400] [-reads 200000] [-budget 1Gi]
//
// It runs itself twice, one process a mode (so that each one's RSS is its
// own): "private", stores of rocks.Options{} (each its own 64 MiB block
// cache, 32 MiB row cache and 64 MiB memtables, as before the budget), then
// "shared", stores of one rocks.Budget of -budget (membudget.Default but
// for its size). Each process opens -shards stores over a recorder of
// nothing, writes -rows rows of -value random bytes to each in
// transactions of 1000, reads -reads random rows of each through its
// transactions (the row cache, then RocksDB), and reports its peak and
// final RSS, Go heap, and what RocksDB's block caches and memtables hold.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// figures are what one mode measured.
type figures struct {
	Mode            string  `json:"mode"`
	PeakRSS         int64   `json:"peakRSS"`
	RSS             int64   `json:"rss"`
	GoHeap          uint64  `json:"goHeap"`
	BlockCaches     uint64  `json:"blockCaches"`
	Memtables       uint64  `json:"memtables"`
	PeakMemtables   uint64  `json:"peakMemtables"`
	RowCachesBudget int64   `json:"rowCachesBudget"`
	WriteSeconds    float64 `json:"writeSeconds"`
	ReadSeconds     float64 `json:"readSeconds"`
}

func main() {
	var (
		shards = flag.Int("shards", 16, "stores of the member")
		rows   = flag.Int("rows", 100_000, "rows written to each store")
		value  = flag.Int("value", 400, "bytes of a row's value")
		reads  = flag.Int("reads", 200_000, "random reads of each store")
		budget = membudget.DefaultBytes
		mode   = flag.String("mode", "", "private or shared: run one mode in this process (the parent runs both)")
	)
	flag.Var(&budget, "budget", "memory budget of the shared mode")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))

	var err error
	if *mode == "" {
		err = compare(os.Args[1:])
	} else {
		var cfg = membudget.Default()
		cfg.Bytes, cfg.Shards = budget, *shards
		var f figures
		if f, err = run(*mode, cfg, *shards, *rows, *value, *reads); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(f)
		}
	}
	if err != nil {
		slog.Error("membudget", "err", err)
		os.Exit(1)
	}
}

// compare runs each mode in a process of its own, with args, and prints
// their figures side by side.
func compare(args []string) error {
	var self, err = os.Executable()
	if err != nil {
		return fmt.Errorf("finding the executable: %w", err)
	}
	var got []figures
	for _, mode := range []string{"private", "shared"} {
		var cmd = exec.Command(self, append(slices.Clone(args), "-mode", mode)...)
		cmd.Stderr = os.Stderr
		var out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("running mode %s: %w", mode, err)
		}
		var f figures
		if err = json.Unmarshal(out, &f); err != nil {
			return fmt.Errorf("reading the figures of mode %s (%q): %w", mode, out, err)
		}
		got = append(got, f)
	}
	var w = bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "%-34s %14s %14s\n", "MiB (seconds)", got[0].Mode, got[1].Mode)
	var mib = func(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) }
	for _, row := range []struct {
		name string
		v    func(figures) string
	}{
		{"peak RSS", func(f figures) string { return mib(f.PeakRSS) }},
		{"RSS at the end", func(f figures) string { return mib(f.RSS) }},
		{"Go heap in use", func(f figures) string { return mib(int64(f.GoHeap)) }},
		{"block caches (memtables charged)", func(f figures) string { return mib(int64(f.BlockCaches)) }},
		{"memtables at the end", func(f figures) string { return mib(int64(f.Memtables)) }},
		{"memtables at most", func(f figures) string { return mib(int64(f.PeakMemtables)) }},
		{"row caches' budget", func(f figures) string { return mib(f.RowCachesBudget) }},
		{"write (s)", func(f figures) string { return strconv.FormatFloat(f.WriteSeconds, 'f', 1, 64) }},
		{"random reads (s)", func(f figures) string { return strconv.FormatFloat(f.ReadSeconds, 'f', 1, 64) }},
	} {
		fmt.Fprintf(w, "%-34s %14s %14s\n", row.name, row.v(got[0]), row.v(got[1]))
	}
	return w.Flush()
}

// run measures one mode.
func run(mode string, cfg membudget.Config, shards, rows, valueLen, reads int) (figures, error) {
	var f = figures{Mode: mode}
	var opts rocks.Options
	switch mode {
	case "private":
		f.RowCachesBudget = int64(shards) * rocks.DefaultRowCacheBytes
	case "shared":
		var b, err = rocks.NewBudget(cfg)
		if err != nil {
			return f, err
		}
		defer b.Close()
		opts.Budget = b
		f.RowCachesBudget = cfg.RowCacheBytes()
	default:
		return f, fmt.Errorf("unknown mode %q (want private or shared)", mode)
	}

	var root, err = os.MkdirTemp("", "membudget-")
	if err != nil {
		return f, fmt.Errorf("making a directory: %w", err)
	}
	defer os.RemoveAll(root)
	var stores []*rocks.Store
	defer func() {
		for _, s := range stores {
			s.Destroy()
		}
	}()
	for i := range shards {
		var s, err = rocks.Open(fmt.Sprintf("%s/%02d", root, i), &nopRecorder{}, opts)
		if err != nil {
			return f, fmt.Errorf("opening store %d: %w", i, err)
		}
		stores = append(stores, s)
	}
	var memtables = func() uint64 {
		var sum uint64
		for _, s := range stores {
			var n, _ = s.DB().GetIntProperty("rocksdb.cur-size-all-mem-tables")
			sum += n
		}
		return sum
	}

	// Writes: the stores in turn, a transaction of 1000 rows each.
	var rng = rand.New(rand.NewPCG(1, 2))
	var value = make([]byte, valueLen)
	var key []byte
	var start = time.Now()
	for base := 0; base < rows; base += 1000 {
		for _, s := range stores {
			for i := base; i < min(base+1000, rows); i++ {
				for j := 0; j+8 <= len(value); j += 8 {
					binary.LittleEndian.PutUint64(value[j:], rng.Uint64())
				}
				key = rowKey(key, i)
				if err := s.Put(key, value); err != nil {
					return f, fmt.Errorf("writing: %w", err)
				}
			}
			if err := commit(s, base); err != nil {
				return f, err
			}
		}
		f.PeakMemtables = max(f.PeakMemtables, memtables())
	}
	f.WriteSeconds = time.Since(start).Seconds()

	// Random reads, in transactions of 1000.
	start = time.Now()
	for r := 0; r < reads; r += 1000 {
		for _, s := range stores {
			for range min(1000, reads-r) {
				key = rowKey(key, rng.IntN(rows))
				if _, ok, err := s.Get(key); err != nil || !ok {
					return f, fmt.Errorf("reading: found %v, %w", ok, err)
				}
			}
			if err := commit(s, rows+r); err != nil {
				return f, err
			}
		}
	}
	f.ReadSeconds = time.Since(start).Seconds()

	f.Memtables = memtables()
	if opts.Budget != nil {
		f.BlockCaches = opts.Budget.Usage().BlockCache
	} else {
		for _, s := range stores {
			var n, _ = s.DB().GetIntProperty("rocksdb.block-cache-usage")
			f.BlockCaches += n
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	f.GoHeap = ms.HeapInuse
	if f.RSS, f.PeakRSS, err = rss(); err != nil {
		return f, err
	}
	return f, nil
}

func rowKey(b []byte, i int) []byte {
	b = append(b[:0], 'r', '/')
	return binary.BigEndian.AppendUint64(b, uint64(i))
}

// commit commits the store's transaction, with a checkpoint at offset n.
func commit(s *rocks.Store, n int) error {
	var cp = pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{"bench/source": {ReadThrough: int64(n)}}}
	var op = s.StartCommit(nil, cp, nil)
	<-op.Done()
	if err := op.Err(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// rss returns the process's resident set size and its peak, in bytes.
func rss() (cur, peak int64, err error) {
	var b []byte
	if b, err = os.ReadFile("/proc/self/status"); err != nil {
		return 0, 0, fmt.Errorf("reading the process's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var name, v, ok = strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		var kb, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("reading %s of /proc/self/status: %w", name, err)
		}
		if name == "VmRSS" {
			cur = kb << 10
		} else {
			peak = kb << 10
		}
	}
	if cur == 0 || peak == 0 {
		return 0, 0, errors.New("no VmRSS or VmHWM in /proc/self/status")
	}
	return cur, peak, nil
}

// nopRecorder records nothing: the stores measure RocksDB and the store's
// own layers, without a recovery log.
type nopRecorder struct{ next atomic.Uint64 }

// NewWritableFile returns a new file handle.
func (r *nopRecorder) NewWritableFile(string) (recoverylog.Fnode, error) {
	return recoverylog.Fnode(r.next.Add(1)), nil
}

// Append records nothing.
func (*nopRecorder) Append(recoverylog.Fnode, []byte) error { return nil }

// PositionedAppend records nothing.
func (*nopRecorder) PositionedAppend(recoverylog.Fnode, []byte, int64) error { return nil }

// Sync records nothing.
func (*nopRecorder) Sync(recoverylog.Fnode) error { return nil }

// Close records nothing.
func (*nopRecorder) Close(recoverylog.Fnode) error { return nil }

// Rename records nothing.
func (*nopRecorder) Rename(string, string) error { return nil }

// Link records nothing.
func (*nopRecorder) Link(string, string) error { return nil }

// Delete records nothing.
func (*nopRecorder) Delete(string) error { return nil }

// Barrier is resolved.
func (*nopRecorder) Barrier(client.OpFutures) client.OpFuture { return client.FinishedOperation(nil) }

var _ rocks.FileRecorder = (*nopRecorder)(nil)
