package membudget

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
	}{
		{"0", 0}, {"1048576", 1 << 20}, {"512Mi", 512 << 20}, {"512MiB", 512 << 20}, {"1Gi", 1 << 30},
		{"1.5Gi", 3 << 29}, {"64Ki", 64 << 10}, {"2Ti", 2 << 40}, {" 3Mi ", 3 << 20},
	} {
		if got, err := ParseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "Gi", "1G", "1GB", "-1Mi", "1e30Gi", "NaN", "Inf", "1 Gi", "lots"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, not an error", in, got)
		} else if !strings.Contains(err.Error(), "not a size") {
			t.Errorf("ParseSize(%q): %v", in, err)
		}
	}
	for _, s := range []Size{0, 1, 1 << 20, 3 << 29, 1 << 30, 1<<30 + 1} {
		if back, err := ParseSize(s.String()); err != nil || back != s {
			t.Errorf("%d formats as %q, which parses as %d, %v", int64(s), s.String(), back, err)
		}
	}
	if got := (Size(1536 << 20)).String(); got != "1536Mi" {
		t.Errorf("1.5 GiB formats as %q", got)
	}
}

// Size is a flag.Value whose errors the flag package reports with the
// flag's name.
func TestSizeFlag(t *testing.T) {
	var fs = flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	var s = DefaultBytes
	fs.Var(&s, FlagBytes, "budget")
	if err := fs.Parse([]string{"--" + FlagBytes + "=2Gi"}); err != nil || s != 2<<30 {
		t.Fatalf("parsed %s, %v", s, err)
	}
	var err = fs.Parse([]string{"--" + FlagBytes + "=2GB"})
	if err == nil || !strings.Contains(err.Error(), FlagBytes) || !strings.Contains(err.Error(), `"2GB"`) {
		t.Fatalf("a malformed size: %v", err)
	}
}

func TestDefaultSizes(t *testing.T) {
	var c = Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// 1 GiB: 256 MiB of row caches, a block cache of 768 MiB of which
	// memtables take up to 256 MiB, 16 MiB each for 16 shards.
	if c.RowCacheBytes() != 256<<20 || c.BlockCacheBytes() != 768<<20 || c.WriteBufferBytes() != 256<<20 || c.MemtableBytes() != 16<<20 {
		t.Errorf("default sizes: rows %d, block cache %d, write buffers %d, memtable %d",
			c.RowCacheBytes(), c.BlockCacheBytes(), c.WriteBufferBytes(), c.MemtableBytes())
	}
	c.Shards = 1
	if c.MemtableBytes() != MaxMemtableBytes {
		t.Errorf("one shard's memtable is %d bytes", c.MemtableBytes())
	}
	c.Shards = 100000
	if c.MemtableBytes() != MinMemtableBytes {
		t.Errorf("a memtable of 100000 shards is %d bytes", c.MemtableBytes())
	}
}

// A store's memtable is the write buffers' budget over the stores open, up
// to Shards of them, within the bounds of a memtable.
func TestMemtableBytesOfOpenStores(t *testing.T) {
	var c = Default() // 256 MiB of write buffers, 16 shards.
	for _, tc := range []struct {
		stores int
		want   int64
	}{
		{0, MaxMemtableBytes}, {1, MaxMemtableBytes}, {4, 64 << 20}, {5, 256 << 20 / 5},
		{8, 32 << 20}, {16, 16 << 20}, {17, 16 << 20}, {1000, 16 << 20},
	} {
		if got := c.MemtableBytesOf(tc.stores); got != tc.want {
			t.Errorf("%d stores: a memtable of %d bytes, want %d", tc.stores, got, tc.want)
		}
	}
	c.Shards = 1000
	if got := c.MemtableBytesOf(1000); got != MinMemtableBytes {
		t.Errorf("1000 stores of 1000 shards: a memtable of %d bytes, want %d", got, MinMemtableBytes)
	}
	for stores := range 40 {
		if got, most := c.MemtableBytesOf(stores), c.WriteBufferBytes()/int64(max(stores, 1)); got > most && got != MinMemtableBytes {
			t.Errorf("%d stores: memtables of %d bytes each pass the write buffers' budget of %d", stores, got, c.WriteBufferBytes())
		}
	}
}

// Each field out of range is reported, naming its flag and variable.
func TestValidateNamesFlags(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want []string
	}{
		{func(c *Config) { c.Bytes = 1 << 20 }, []string{"--rocksdb.memory-budget", "ROCKSDB_MEMORY_BUDGET", "1Mi", "at least 32Mi"}},
		{func(c *Config) { c.WriteBufferShare = 0 }, []string{"--rocksdb.write-buffer-share", "ROCKSDB_WRITE_BUFFER_SHARE"}},
		{func(c *Config) { c.WriteBufferShare = 1 }, []string{"--rocksdb.write-buffer-share", "below 1"}},
		{func(c *Config) { c.RowCacheShare = -0.1 }, []string{"--rocksdb.row-cache-share", "ROCKSDB_ROW_CACHE_SHARE"}},
		{func(c *Config) { c.RowCacheShare, c.WriteBufferShare = 0.5, 0.45 }, []string{"--rocksdb.write-buffer-share", "--rocksdb.row-cache-share", "below 0.9"}},
		{func(c *Config) { c.Shards = 0 }, []string{"--rocksdb.shards", "ROCKSDB_SHARDS", "at least 1"}},
	} {
		var c = Default()
		tc.edit(&c)
		var err = c.Validate()
		if err == nil {
			t.Errorf("%+v: valid", c)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not name %q", c, err, w)
			}
		}
	}
}

// The member's Config is Default until set, and can't change once read
// with another.
func TestMember(t *testing.T) {
	var c = Default()
	c.Bytes = 2 << 30
	if err := SetMember(Config{}); err == nil {
		t.Fatal("an invalid Config was set")
	}
	if err := SetMember(c); err != nil {
		t.Fatal(err)
	}
	if got := Member(); got != c {
		t.Fatalf("Member() = %+v, want %+v", got, c)
	}
	if err := SetMember(c); err != nil {
		t.Fatalf("setting the same Config again: %v", err)
	}
	if err := SetMember(Default()); !errors.Is(err, ErrMemberInUse) {
		t.Fatalf("changing the Config in use: %v", err)
	}
}
