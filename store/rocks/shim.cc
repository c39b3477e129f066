// A rocksdb::FileSystem which records the file operations of a database into
// a recovery log, through callbacks into Go (exported in callbacks.go).

#include "shim.h"
#include "capi.h"

#include <memory>
#include <vector>
#include <string>

#include <cstring>

#include "rocksdb/c.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/options.h"
#include "rocksdb/perf_level.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"


// Go callbacks. Each returns NULL, or an error message which the caller frees.
extern "C" {
char* gcRecNew(uintptr_t h, char* name, size_t name_len, uint64_t* fnode);
char* gcRecWrite(uintptr_t h, uint64_t fnode, char* data, size_t n, int64_t offset);
char* gcRecSync(uintptr_t h, uint64_t fnode);
char* gcRecClose(uintptr_t h, uint64_t fnode);
char* gcRecRename(uintptr_t h, char* src, size_t src_len, char* dst, size_t dst_len);
char* gcRecLink(uintptr_t h, char* src, size_t src_len, char* dst, size_t dst_len);
char* gcRecDelete(uintptr_t h, char* name, size_t name_len);
}

namespace {

using rocksdb::DataVerificationInfo;
using rocksdb::FileOptions;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

// status converts a callback's result to an IOStatus, freeing its message.
IOStatus status(char* err, const char* what) {
  if (err == nullptr) {
    return IOStatus::OK();
  }
  IOStatus s = IOStatus::IOError(std::string("recovery log: ") + what, err);
  free(err);
  return s;
}

char* cstr(const std::string& s) { return const_cast<char*>(s.data()); }

// RecordedFile records appends to, syncs of and the close of a file.
class RecordedFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  RecordedFile(std::unique_ptr<FSWritableFile>&& t, uintptr_t h, uint64_t fnode,
               uint64_t size)
      : FSWritableFileOwnerWrapper(std::move(t)), h_(h), fnode_(fnode), size_(size) {}

  // A reopened file of size bytes, which the log goes on recording as it
  // is: it can be synced, truncated to its size and closed, and refuses
  // writes (see RecordedFS::ReopenWritableFile).
  static RecordedFile* Reopened(std::unique_ptr<FSWritableFile>&& t, uintptr_t h, uint64_t size) {
    RecordedFile* f = new RecordedFile(std::move(t), h, 0, size);
    f->reopened_ = f->released_ = true;
    return f;
  }

  ~RecordedFile() override { release(); }

  IOStatus Append(const Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    if (reopened_) {
      return refuseReopenedWrite();
    }
    IOStatus s = target()->Append(data, options, dbg);
    return s.ok() ? record(data, -1) : s;
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const DataVerificationInfo& info, IODebugContext* dbg) override {
    if (reopened_) {
      return refuseReopenedWrite();
    }
    IOStatus s = target()->Append(data, options, info, dbg);
    return s.ok() ? record(data, -1) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset,
                            const IOOptions& options, IODebugContext* dbg) override {
    if (reopened_) {
      return refuseReopenedWrite();
    }
    IOStatus s = target()->PositionedAppend(data, offset, options, dbg);
    return s.ok() ? record(data, static_cast<int64_t>(offset)) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset,
                            const IOOptions& options, const DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    if (reopened_) {
      return refuseReopenedWrite();
    }
    IOStatus s = target()->PositionedAppend(data, offset, options, info, dbg);
    return s.ok() ? record(data, static_cast<int64_t>(offset)) : s;
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    if (reopened_ && size != size_) {
      return IOStatus::NotSupported("recovery log: truncation of a reopened file to another size");
    } else if (size < size_) {
      // The recovery log has no truncate op: refuse rather than diverge.
      return IOStatus::NotSupported("recovery log: truncation of a written file");
    }
    return target()->Truncate(size, options, dbg);
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Sync(options, dbg);
    return s.ok() && !reopened_ ? status(gcRecSync(h_, fnode_), "sync") : s;
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Fsync(options, dbg);
    return s.ok() && !reopened_ ? status(gcRecSync(h_, fnode_), "fsync") : s;
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    IOStatus s = target()->RangeSync(offset, nbytes, options, dbg);
    return s.ok() && !reopened_ ? status(gcRecSync(h_, fnode_), "range sync") : s;
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->Close(options, dbg);
    IOStatus r = release();
    return s.ok() ? r : s;
  }

 private:
  IOStatus record(const Slice& data, int64_t offset) {
    if (offset < 0) {
      size_ += data.size();
    } else if (offset + data.size() > size_) {
      size_ = offset + data.size();
    }
    return status(gcRecWrite(h_, fnode_, const_cast<char*>(data.data()), data.size(), offset),
                  "write");
  }
  IOStatus release() {
    if (released_) {
      return IOStatus::OK();
    }
    released_ = true;
    return status(gcRecClose(h_, fnode_), "close");
  }

  static IOStatus refuseReopenedWrite() {
    // Recording it anew, with its content, would cost its size in the log;
    // recording it anew only at a first write would need the log to swap
    // the file's content whole. RocksDB (7.8) never writes a reopened file:
    // refuse rather than diverge, should a later one.
    return IOStatus::NotSupported("recovery log: a write to a reopened file");
  }

  uintptr_t h_;
  uint64_t fnode_;
  uint64_t size_;
  bool reopened_ = false;
  bool released_ = false;
};

// RecordedFS records the file operations of a database.
class RecordedFS : public rocksdb::FileSystemWrapper {
 public:
  RecordedFS(const std::shared_ptr<rocksdb::FileSystem>& t, uintptr_t h)
      : FileSystemWrapper(t), h_(h) {}

  static const char* kClassName() { return "GazconsumerRecordedFS"; }
  const char* Name() const override { return kClassName(); }

  // NewWritableFile records a new file. A file of that name is removed
  // first, not truncated: its inode may be shared with a file of another
  // store, linked (see Opener.LinkFiles).
  IOStatus NewWritableFile(const std::string& f, const FileOptions& opts,
                           std::unique_ptr<FSWritableFile>* r,
                           IODebugContext* dbg) override {
    IOStatus s = target()->DeleteFile(f, opts.io_options, dbg);
    if (!s.ok() && !s.IsNotFound() && !s.IsPathNotFound()) {
      return s;
    }
    s = target()->NewWritableFile(f, opts, r, dbg);
    if (!s.ok()) {
      return s;
    }
    uint64_t fnode = 0;
    s = status(gcRecNew(h_, cstr(f), f.size(), &fnode), "create");
    if (!s.ok()) {
      r->reset();
      return s;
    }
    r->reset(new RecordedFile(std::move(*r), h_, fnode, 0));
    return s;
  }

  // ReopenWritableFile opens file f, which the log goes on recording as it
  // is: RocksDB reopens its last write-ahead log as it recovers only to
  // truncate it to its size. The file refuses writes, and truncations to
  // another size, so that it's opened in place even if its inode is shared
  // with a file of another store, linked (see Opener.LinkFiles). (A file
  // recorded anew at each reopen, as once it was, cost its size in the log
  // and the time to append it at each open, and a process which died while
  // appending it left a log holding the file partly, its content lost.)
  IOStatus ReopenWritableFile(const std::string& f, const FileOptions& opts,
                              std::unique_ptr<FSWritableFile>* r,
                              IODebugContext* dbg) override {
    uint64_t size = 0;
    IOStatus s = target()->GetFileSize(f, opts.io_options, &size, dbg);
    if (s.IsNotFound() || s.IsPathNotFound()) {
      return NewWritableFile(f, opts, r, dbg);
    } else if (!s.ok() || !(s = target()->ReopenWritableFile(f, opts, r, dbg)).ok()) {
      return s;
    }
    r->reset(RecordedFile::Reopened(std::move(*r), h_, size));
    return s;
  }

  IOStatus ReuseWritableFile(const std::string&, const std::string&, const FileOptions&,
                             std::unique_ptr<FSWritableFile>*, IODebugContext*) override {
    return IOStatus::NotSupported("recovery log: WAL recycling must be off");
  }

  IOStatus NewRandomRWFile(const std::string&, const FileOptions&,
                           std::unique_ptr<rocksdb::FSRandomRWFile>*,
                           IODebugContext*) override {
    return IOStatus::NotSupported("recovery log: random read-write files");
  }

  IOStatus Truncate(const std::string& f, size_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    uint64_t cur = 0;
    IOStatus s = target()->GetFileSize(f, options, &cur, dbg);
    if (!s.ok()) {
      return s;
    } else if (size < cur) {
      return IOStatus::NotSupported("recovery log: truncation of a written file");
    }
    return target()->Truncate(f, size, options, dbg);
  }

  IOStatus RenameFile(const std::string& src, const std::string& dst,
                      const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->RenameFile(src, dst, options, dbg);
    return s.ok() ? status(gcRecRename(h_, cstr(src), src.size(), cstr(dst), dst.size()),
                           "rename")
                  : s;
  }

  IOStatus LinkFile(const std::string& src, const std::string& dst,
                    const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = target()->LinkFile(src, dst, options, dbg);
    return s.ok() ? status(gcRecLink(h_, cstr(src), src.size(), cstr(dst), dst.size()),
                           "link")
                  : s;
  }

  IOStatus DeleteFile(const std::string& f, const IOOptions& options,
                      IODebugContext* dbg) override {
    IOStatus s = target()->DeleteFile(f, options, dbg);
    return s.ok() ? status(gcRecDelete(h_, cstr(f), f.size()), "delete") : s;
  }

 private:
  uintptr_t h_;
};

}  // namespace

extern "C" char* gc_install_recorded_fs(void* c_env, uintptr_t handle) {
  try {
    auto fs = std::make_shared<RecordedFS>(rocksdb::FileSystem::Default(), handle);
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    auto* e = static_cast<rocksdb_env_t*>(c_env);
    if (!e->is_default) {
      delete e->rep;
    }
    e->rep = env.release();
    e->is_default = false;  // rocksdb_env_destroy now deletes it.
    return nullptr;
  } catch (const std::exception& ex) {
    return strdup(ex.what());
  }
}

extern "C" int64_t gc_get(void* c_db, void* c_ro, const char* key, size_t key_len, char* buf, size_t cap,
                          char** err) {
  // The level is the thread's, and on by default (counting every key
  // comparison, a lookup of thread-local storage each): Go calls in from
  // whichever thread runs the goroutine, so set it on every call.
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  *err = nullptr;
  rocksdb_pinnableslice_t* v = rocksdb_get_pinned(static_cast<rocksdb_t*>(c_db),
      static_cast<rocksdb_readoptions_t*>(c_ro), key, key_len, err);
  if (*err != nullptr) {
    return -2;
  }
  if (v == nullptr) {
    return -1;
  }
  size_t n = 0;
  const char* data = rocksdb_pinnableslice_value(v, &n);
  if (n <= cap) {
    memcpy(buf, data, n);
  }
  rocksdb_pinnableslice_destroy(v);
  return static_cast<int64_t>(n);
}


namespace {

// RepBatch is a WriteBatch made from its representation, which it gives
// back once written: the buffer of one commit's batch is that of the next.
class RepBatch : public rocksdb::WriteBatch {
 public:
  explicit RepBatch(std::string&& rep) : rocksdb::WriteBatch(std::move(rep)) {}
  std::string Release() { return std::move(rep_); }
};

// Batch is the buffer of a store's WriteBatch representations. Its memory
// is kept from one commit to the next, so that a commit's batch is written
// into pages the process has already touched: a buffer of tens of MiB
// allocated anew comes from the kernel as fresh pages, each faulted in and
// cleared on its first write. A buffer kept past kBatchKeep is released
// once kBatchShrinkAfter writes in a row used less than a quarter of it:
// one large commit doesn't hold its memory for good, and commits whose
// sizes vary don't allocate it over and over.
struct Batch {
  std::string rep;
  int small = 0;  // Writes in a row of less than a quarter of rep's capacity.
};
constexpr size_t kBatchKeep = 8 << 20;
constexpr int kBatchShrinkAfter = 64;

}  // namespace

extern "C" void* gc_batch_new() { return new Batch(); }

extern "C" void gc_batch_free(void* b) { delete static_cast<Batch*>(b); }

extern "C" size_t gc_batch_capacity(void* b) { return static_cast<Batch*>(b)->rep.capacity(); }

extern "C" char* gc_batch_reserve(void* b, size_t n, char** err) {
  *err = nullptr;
  try {
    std::string* s = &static_cast<Batch*>(b)->rep;
    s->resize(n);
    return s->data();
  } catch (const std::exception& ex) {
    *err = strdup(ex.what());
    return nullptr;
  }
}

extern "C" char* gc_batch_write(void* c_db, void* c_wo, void* b, size_t n) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // As gc_get.
  Batch* batch = static_cast<Batch*>(b);
  std::string* s = &batch->rep;
  try {
    s->resize(n);
    RepBatch wb(std::move(*s));
    rocksdb::Status st =
        static_cast<rocksdb_t*>(c_db)->rep->Write(static_cast<rocksdb_writeoptions_t*>(c_wo)->rep, &wb);
    *s = wb.Release();
    if (s->capacity() <= kBatchKeep || n >= s->capacity() / 4) {
      batch->small = 0;
    } else if (++batch->small >= kBatchShrinkAfter) {
      std::string().swap(*s);
      batch->small = 0;
    }
    if (!st.ok()) {
      return strdup(st.ToString().c_str());
    }
    return nullptr;
  } catch (const std::exception& ex) {
    return strdup(ex.what());
  }
}

extern "C" int64_t gc_multiget(void* c_db, void* c_ro, const char* keys, const int64_t* ends, size_t n, int64_t* lens,
                               char* buf, size_t cap, char** err) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // As gc_get.
  *err = nullptr;
  try {
    rocksdb::DB* db = static_cast<rocksdb_t*>(c_db)->rep;
    const rocksdb::ReadOptions& ro = static_cast<rocksdb_readoptions_t*>(c_ro)->rep;
    std::vector<rocksdb::Slice> ks(n);
    int64_t begin = 0;
    for (size_t i = 0; i < n; i++) {
      ks[i] = rocksdb::Slice(keys + begin, static_cast<size_t>(ends[i] - begin));
      begin = ends[i];
    }
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    db->MultiGet(ro, db->DefaultColumnFamily(), n, ks.data(), values.data(), statuses.data(), /*sorted_input=*/false);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
      if (statuses[i].IsNotFound()) {
        lens[i] = -1;
        continue;
      } else if (!statuses[i].ok()) {
        *err = strdup(statuses[i].ToString().c_str());
        return -2;
      }
      size_t len = values[i].size();
      lens[i] = static_cast<int64_t>(len);
      if (len != 0 && total + len <= cap) {
        memcpy(buf + total, values[i].data(), len);
      }
      total += len;
    }
    return static_cast<int64_t>(total);
  } catch (const std::exception& ex) {
    *err = strdup(ex.what());
    return -2;
  }
}

extern "C" char* gc_approximate_sizes(void* c_db, const char* starts, const int64_t* start_ends, const char* ends,
                                      const int64_t* end_ends, size_t n, uint64_t* sizes) {
  try {
    rocksdb::DB* db = static_cast<rocksdb_t*>(c_db)->rep;
    std::vector<rocksdb::Range> ranges(n);
    int64_t start = 0, end = 0;
    for (size_t i = 0; i < n; i++) {
      ranges[i] = rocksdb::Range(rocksdb::Slice(starts + start, static_cast<size_t>(start_ends[i] - start)),
                                 rocksdb::Slice(ends + end, static_cast<size_t>(end_ends[i] - end)));
      start = start_ends[i];
      end = end_ends[i];
    }
    rocksdb::SizeApproximationOptions o;
    // RocksDB's estimates of a memtable's rows are of its skip list's
    // levels: for a few thousand rows, all of them or none, whatever the
    // range. The files' are of their indexes' blocks.
    o.include_memtables = false;
    o.include_files = true;
    rocksdb::Status st = db->GetApproximateSizes(o, db->DefaultColumnFamily(), ranges.data(), static_cast<int>(n), sizes);
    if (!st.ok()) {
      return strdup(st.ToString().c_str());
    }
    return nullptr;
  } catch (const std::exception& ex) {
    return strdup(ex.what());
  }
}

extern "C" void* gc_scan_new(void* c_db, void* c_ro, const char* start, size_t start_len) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // As gc_get.
  rocksdb::DB* db = static_cast<rocksdb_t*>(c_db)->rep;
  rocksdb::Iterator* it = db->NewIterator(static_cast<rocksdb_readoptions_t*>(c_ro)->rep);
  it->Seek(rocksdb::Slice(start, start_len));
  return it;
}

extern "C" void gc_scan_free(void* it) { delete static_cast<rocksdb::Iterator*>(it); }

// put32 writes v into p, little-endian.
static void put32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v);
  p[1] = static_cast<char>(v >> 8);
  p[2] = static_cast<char>(v >> 16);
  p[3] = static_cast<char>(v >> 24);
}

extern "C" int64_t gc_scan_next(void* c_it, const char* end, size_t end_len, int has_end, char* buf, size_t cap,
                                int64_t* need, char** err) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // As gc_get.
  *err = nullptr;
  *need = 0;
  rocksdb::Iterator* it = static_cast<rocksdb::Iterator*>(c_it);
  const rocksdb::Slice limit(end, end_len);
  size_t n = 0;
  for (; it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (has_end && k.compare(limit) >= 0) {
      break;
    }
    const rocksdb::Slice v = it->value();
    const size_t size = 8 + k.size() + v.size();
    if (n + size > cap) {
      if (n == 0) {
        *need = static_cast<int64_t>(size);
      }
      return static_cast<int64_t>(n);
    }
    put32(buf + n, static_cast<uint32_t>(k.size()));
    put32(buf + n + 4, static_cast<uint32_t>(v.size()));
    memcpy(buf + n + 8, k.data(), k.size());
    memcpy(buf + n + 8 + k.size(), v.data(), v.size());
    n += size;
  }
  if (!it->status().ok()) {
    *err = strdup(it->status().ToString().c_str());
    return -2;
  }
  return n == 0 ? -1 : static_cast<int64_t>(n);
}

// The handle of gc_wbm_new: the C API of RocksDB 7.8 has no
// WriteBufferManager.
using WBM = std::shared_ptr<rocksdb::WriteBufferManager>;

extern "C" void* gc_wbm_new(void* c_cache, size_t buffer_size, char** err) {
  *err = nullptr;
  try {
    auto* cache = static_cast<rocksdb_cache_t*>(c_cache);
    return new WBM(std::make_shared<rocksdb::WriteBufferManager>(buffer_size, cache->rep,
                                                                /*allow_stall=*/false));
  } catch (const std::exception& ex) {
    *err = strdup(ex.what());
    return nullptr;
  }
}

extern "C" void gc_wbm_destroy(void* wbm) { delete static_cast<WBM*>(wbm); }

extern "C" size_t gc_wbm_usage(void* wbm, size_t* mutable_usage) {
  const WBM& m = *static_cast<WBM*>(wbm);
  *mutable_usage = m->mutable_memtable_memory_usage();
  return m->memory_usage();
}

extern "C" size_t gc_wbm_buffer_size(void* wbm) { return (*static_cast<WBM*>(wbm))->buffer_size(); }

extern "C" void gc_options_set_wbm(void* c_opts, void* wbm) {
  static_cast<rocksdb_options_t*>(c_opts)->rep.write_buffer_manager = *static_cast<WBM*>(wbm);
}

extern "C" void gc_options_set_avoid_flush_during_recovery(void* c_opts, int v) {
  static_cast<rocksdb_options_t*>(c_opts)->rep.avoid_flush_during_recovery = v != 0;
}

extern "C" char* gc_live_files(void* c_db, uint64_t wal_size_for_flush, char** out, size_t* out_len) {
  *out = nullptr;
  *out_len = 0;
  try {
    rocksdb::DB* db = static_cast<rocksdb_t*>(c_db)->rep;
    rocksdb::LiveFilesStorageInfoOptions opts;
    opts.wal_size_for_flush = wal_size_for_flush;
    std::vector<rocksdb::LiveFileStorageInfo> files;
    rocksdb::Status s = db->GetLiveFilesStorageInfo(opts, &files);
    if (!s.ok()) {
      return strdup(s.ToString().c_str());
    }
    std::string joined;
    for (const rocksdb::LiveFileStorageInfo& f : files) {
      joined.append(std::to_string(static_cast<int>(f.file_type)));
      joined.push_back('\t');
      joined.append(f.relative_filename);
      joined.push_back('\t');
      joined.append(std::to_string(f.size));
      joined.push_back('\n');
    }
    *out = static_cast<char*>(malloc(joined.size() + 1));
    memcpy(*out, joined.data(), joined.size());
    *out_len = joined.size();
    return nullptr;
  } catch (const std::exception& e) {
    return strdup(e.what());
  }
}
