// The handles of RocksDB's C API, as laid out by its c.cc (7.8), for the
// shim's C++ to reach the objects behind them (only their first members are
// used). C++ only.

#ifndef GAZCONSUMER_STORE_ROCKS_CAPI_H
#define GAZCONSUMER_STORE_ROCKS_CAPI_H

#include <memory>

#include "rocksdb/c.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"

struct rocksdb_env_t {
  rocksdb::Env* rep;
  bool is_default;
};
struct rocksdb_options_t {
  rocksdb::Options rep;
};
struct rocksdb_cache_t {
  std::shared_ptr<rocksdb::Cache> rep;
};
struct rocksdb_t {
  rocksdb::DB* rep;
};
struct rocksdb_readoptions_t {
  rocksdb::ReadOptions rep;
};
struct rocksdb_writeoptions_t {
  rocksdb::WriteOptions rep;
};

#endif  // GAZCONSUMER_STORE_ROCKS_CAPI_H
