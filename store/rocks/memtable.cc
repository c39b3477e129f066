// A skip list memtable which knows which keys it certainly lacks.
//
// With in-place updates (the store's setting), RocksDB writes each Put of a
// batch with MemTable::Update, which first searches the skip list for the
// key's latest version, from its top, and only then, not finding it, inserts
// it: a second search. Most rows a large transaction writes are new to the
// memtable, and the first search is then wasted (a third of the write's
// time in the benchmark `large`). This memtable is RocksDB's own skip list
// plus a Bloom filter of the user keys inserted into it, which answers that
// search at once for a key it never held.
//
// The filter answers only exact lookups of a user key. That is what every
// caller of GetDynamicPrefixIterator asks of it in RocksDB 7.8 without a
// prefix extractor (MemTable::Update, UpdateCallback,
// CountSuccessiveMergeEntries and MemTableRep::Get, which the skip list
// overrides anyway): MemTable's own iterators ask for GetIterator, or, with
// a prefix extractor, for the dynamic prefix iterator, which is why a
// memtable created with one is the plain skip list. Keys are compared as
// bytes (the store's comparator), so equal keys hash alike. The filter is
// written by the memtable's one writer (the factory refuses concurrent
// inserts) and read by that writer only; its words are atomics all the same,
// so that no reader can race it.

#include "shim.h"
#include "capi.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>

#include "rocksdb/memtablerep.h"
#include "rocksdb/options.h"

namespace {

// KeyFilter is a blocked Bloom filter: each key sets kProbes bits of one
// 64-byte block.
class KeyFilter {
 public:
  explicit KeyFilter(size_t bytes)
      : blocks_(std::max<size_t>(1, bytes / kBlockBytes)),
        words_(new std::atomic<uint64_t>[blocks_ * kBlockWords]) {
    for (size_t i = 0; i < blocks_ * kBlockWords; i++) {
      words_[i].store(0, std::memory_order_relaxed);
    }
  }

  // Add sets the bits of key; one thread at a time.
  void Add(std::string_view key) {
    uint64_t h = Hash(key);
    std::atomic<uint64_t>* block = Block(h);
    for (int i = 0; i < kProbes; i++, h >>= 9) {
      std::atomic<uint64_t>& w = block[(h >> 6) & (kBlockWords - 1)];
      w.store(w.load(std::memory_order_relaxed) | (uint64_t{1} << (h & 63)), std::memory_order_relaxed);
    }
  }

  // MayContain is false only if key was never added.
  bool MayContain(std::string_view key) const {
    uint64_t h = Hash(key);
    const std::atomic<uint64_t>* block = Block(h);
    for (int i = 0; i < kProbes; i++, h >>= 9) {
      if ((block[(h >> 6) & (kBlockWords - 1)].load(std::memory_order_relaxed) & (uint64_t{1} << (h & 63))) == 0) {
        return false;
      }
    }
    return true;
  }

  size_t Bytes() const { return blocks_ * kBlockBytes; }

 private:
  static constexpr size_t kBlockBytes = 64;
  static constexpr size_t kBlockWords = kBlockBytes / sizeof(uint64_t);
  static constexpr int kProbes = 6;  // Of 9 bits each: 54 of the hash's low bits.

  static uint64_t Hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

  // Block picks a block by the hash's product with a constant (its high
  // bits, mixed), scaled to the count of blocks without a division.
  std::atomic<uint64_t>* Block(uint64_t h) const {
    uint64_t mixed = h * 0x9E3779B97F4A7C15ull;
    return &words_[static_cast<size_t>((static_cast<unsigned __int128>(mixed) * blocks_) >> 64) * kBlockWords];
  }

  const size_t blocks_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

// UserKeyOf returns the user key of an internal key (the user key, then an
// 8-byte sequence number and type).
std::string_view UserKeyOf(const rocksdb::Slice& internal_key) {
  return std::string_view(internal_key.data(), internal_key.size() >= 8 ? internal_key.size() - 8 : 0);
}

// UserKeyOfEntry returns the user key of a memtable entry: the internal
// key's varint32 length, then the internal key.
std::string_view UserKeyOfEntry(const char* entry) {
  uint32_t n = 0;
  int shift = 0;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(entry);
  for (; shift <= 28; shift += 7, p++) {
    n |= static_cast<uint32_t>(*p & 0x7f) << shift;
    if ((*p & 0x80) == 0) {
      p++;
      break;
    }
  }
  return std::string_view(reinterpret_cast<const char*>(p), n >= 8 ? n - 8 : 0);
}

// FilteredIterator is an iterator of the skip list whose Seek answers at once
// for a key the filter lacks.
class FilteredIterator : public rocksdb::MemTableRep::Iterator {
 public:
  FilteredIterator(rocksdb::MemTableRep::Iterator* it, const KeyFilter* filter) : it_(it), filter_(filter) {}

  bool Valid() const override { return !absent_ && it_->Valid(); }
  const char* key() const override { return it_->key(); }
  void Next() override { it_->Next(); }
  void Prev() override { it_->Prev(); }
  void Seek(const rocksdb::Slice& internal_key, const char* memtable_key) override {
    absent_ = !filter_->MayContain(UserKeyOf(internal_key));
    if (!absent_) {
      it_->Seek(internal_key, memtable_key);
    }
  }
  void SeekForPrev(const rocksdb::Slice& internal_key, const char* memtable_key) override {
    absent_ = false;
    it_->SeekForPrev(internal_key, memtable_key);
  }
  void RandomSeek() override {
    absent_ = false;
    it_->RandomSeek();
  }
  void SeekToFirst() override {
    absent_ = false;
    it_->SeekToFirst();
  }
  void SeekToLast() override {
    absent_ = false;
    it_->SeekToLast();
  }

 private:
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it_;
  const KeyFilter* filter_;
  bool absent_ = false;
};

// FilteredRep is a skip list memtable and the filter of its keys.
class FilteredRep : public rocksdb::MemTableRep {
 public:
  FilteredRep(rocksdb::MemTableRep* list, rocksdb::Allocator* allocator, size_t filter_bytes)
      : MemTableRep(allocator), list_(list), filter_(filter_bytes) {}

  rocksdb::KeyHandle Allocate(const size_t len, char** buf) override { return list_->Allocate(len, buf); }
  void Insert(rocksdb::KeyHandle handle) override {
    Add(handle);
    list_->Insert(handle);
  }
  bool InsertKey(rocksdb::KeyHandle handle) override {
    Add(handle);
    return list_->InsertKey(handle);
  }
  void InsertWithHint(rocksdb::KeyHandle handle, void** hint) override {
    Add(handle);
    list_->InsertWithHint(handle, hint);
  }
  bool InsertKeyWithHint(rocksdb::KeyHandle handle, void** hint) override {
    Add(handle);
    return list_->InsertKeyWithHint(handle, hint);
  }
  // The concurrent inserts are never called (the factory doesn't support
  // them, and RocksDB refuses concurrent memtable writes for it): they're
  // the plain ones.
  void InsertWithHintConcurrently(rocksdb::KeyHandle handle, void** hint) override { InsertWithHint(handle, hint); }
  bool InsertKeyWithHintConcurrently(rocksdb::KeyHandle handle, void** hint) override { return InsertKeyWithHint(handle, hint); }
  void InsertConcurrently(rocksdb::KeyHandle handle) override { Insert(handle); }
  bool InsertKeyConcurrently(rocksdb::KeyHandle handle) override { return InsertKey(handle); }

  bool Contains(const char* key) const override { return list_->Contains(key); }
  void MarkReadOnly() override { list_->MarkReadOnly(); }
  void MarkFlushed() override { list_->MarkFlushed(); }
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override {
    list_->Get(k, callback_args, callback_func);
  }
  uint64_t ApproximateNumEntries(const rocksdb::Slice& start_ikey, const rocksdb::Slice& end_ikey) override {
    return list_->ApproximateNumEntries(start_ikey, end_ikey);
  }
  void UniqueRandomSample(const uint64_t num_entries, const uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override {
    list_->UniqueRandomSample(num_entries, target_sample_size, entries);
  }
  size_t ApproximateMemoryUsage() override { return list_->ApproximateMemoryUsage() + filter_.Bytes(); }
  Iterator* GetIterator(rocksdb::Arena* arena) override { return list_->GetIterator(arena); }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    if (arena != nullptr) {
      // An arena's iterators are destroyed in place: only the list's own.
      // (No caller of RocksDB 7.8 passes one without a prefix extractor.)
      return list_->GetDynamicPrefixIterator(arena);
    }
    return new FilteredIterator(list_->GetDynamicPrefixIterator(nullptr), &filter_);
  }
  bool IsMergeOperatorSupported() const override { return list_->IsMergeOperatorSupported(); }
  bool IsSnapshotSupported() const override { return list_->IsSnapshotSupported(); }

 private:
  void Add(rocksdb::KeyHandle handle) { filter_.Add(UserKeyOfEntry(static_cast<const char*>(handle))); }

  std::unique_ptr<rocksdb::MemTableRep> list_;
  KeyFilter filter_;
};

// FilteredSkipListFactory makes FilteredReps, each with a filter of
// filter_bytes.
class FilteredSkipListFactory : public rocksdb::MemTableRepFactory {
 public:
  explicit FilteredSkipListFactory(size_t filter_bytes) : filter_bytes_(filter_bytes) {}

  static const char* kClassName() { return "GazconsumerFilteredSkipListFactory"; }
  const char* Name() const override { return kClassName(); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& cmp,
                                          rocksdb::Allocator* allocator, const rocksdb::SliceTransform* transform,
                                          rocksdb::Logger* logger) override {
    rocksdb::MemTableRep* list = list_.CreateMemTableRep(cmp, allocator, transform, logger);
    if (transform != nullptr) {
      return list;  // Its dynamic prefix iterators also seek ranges: see above.
    }
    return new FilteredRep(list, allocator, filter_bytes_);
  }

  bool IsInsertConcurrentlySupported() const override { return false; }
  bool CanHandleDuplicatedKey() const override { return list_.CanHandleDuplicatedKey(); }

 private:
  rocksdb::SkipListFactory list_;
  const size_t filter_bytes_;
};

}  // namespace

extern "C" int gc_options_set_filtered_memtable(void* c_opts, double ratio, size_t min_bytes) {
  rocksdb::Options& o = static_cast<rocksdb_options_t*>(c_opts)->rep;
  if (!o.inplace_update_support || o.allow_concurrent_memtable_write || o.memtable_factory == nullptr ||
      std::strcmp(o.memtable_factory->Name(), rocksdb::SkipListFactory::kClassName()) != 0) {
    return 0;
  }
  size_t bytes = std::max(min_bytes, static_cast<size_t>(static_cast<double>(o.write_buffer_size) * ratio));
  o.memtable_factory = std::make_shared<FilteredSkipListFactory>(bytes);
  return 1;
}
