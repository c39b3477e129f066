package rocks

import (
	"fmt"
	"strconv"

	"github.com/linxGnu/grocksdb"
	pb "go.gazette.dev/core/broker/protocol"
)

// Labels of a ShardSpec which tune its store (see OptionsFromLabels).
const (
	// LabelBlockCacheBytes is the size of the block cache, in bytes.
	LabelBlockCacheBytes = "gazconsumer.dev/rocks-block-cache-bytes"
	// LabelCompression is the compression of SST files: none, snappy, lz4
	// or zstd.
	LabelCompression = "gazconsumer.dev/rocks-compression"
)

// Default option values.
const (
	DefaultBlockCacheBytes = 64 << 20
	DefaultCompression     = "lz4"
)

// Options tune a Store. Zero-valued fields take their defaults.
type Options struct {
	// BlockCacheBytes is the capacity of the LRU block cache.
	BlockCacheBytes uint64
	// Compression of SST files: "none", "snappy", "lz4" or "zstd".
	Compression string
	// Tune, if set, further adjusts the RocksDB options before the database
	// opens. The recorded Env, WAL recycling and CreateIfMissing are set
	// after it and may not be changed.
	Tune func(*grocksdb.Options)
}

// OptionsFromLabels returns Options set from a shard's labels.
func OptionsFromLabels(labels pb.LabelSet) (Options, error) {
	var o Options
	if v := labels.ValueOf(LabelBlockCacheBytes); v != "" {
		var n, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("label %s: %w", LabelBlockCacheBytes, err)
		}
		o.BlockCacheBytes = n
	}
	o.Compression = labels.ValueOf(LabelCompression)
	if _, err := o.compression(); err != nil {
		return o, err
	}
	return o, nil
}

func (o Options) compression() (grocksdb.CompressionType, error) {
	switch o.Compression {
	case "":
		return grocksdb.LZ4Compression, nil
	case "none":
		return grocksdb.NoCompression, nil
	case "snappy":
		return grocksdb.SnappyCompression, nil
	case "lz4":
		return grocksdb.LZ4Compression, nil
	case "zstd":
		return grocksdb.ZSTDCompression, nil
	}
	return 0, fmt.Errorf("unknown compression %q (want none, snappy, lz4 or zstd)", o.Compression)
}
