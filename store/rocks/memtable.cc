// A skip list memtable which knows which keys it certainly lacks, and where
// the latest version of each key it holds lies.
//
// With in-place updates (the store's setting), RocksDB writes each Put of a
// batch with MemTable::Update, which first searches the skip list for the
// key's latest version, from its top, and then updates it in place or, not
// finding it, inserts the key: a second search. Both searches cost a miss of
// the processor's caches a level. This memtable is RocksDB's own skip list
// plus:
//
//   - a Bloom filter of the user keys inserted into it, which answers that
//     first search at once for a key it never held (most rows of a large
//     transaction, as a key space is first met);
//   - an index of the user keys inserted into it (a hash table), which
//     answers it for a key it holds (a row rewritten while the memtable
//     holds it) with the entry of its latest version, the one the search
//     would have found: the entry inserted last for the key, as a memtable
//     inserts in the order of sequence numbers (one writer). The index is
//     bounded (a share of the memtable's size, which it counts in the
//     memtable's memory); once full it takes no more keys, and a key it
//     lacks is then searched for as before.
//
// Both answer only exact lookups of a user key. That is what every caller
// of GetDynamicPrefixIterator asks of it in RocksDB 7.8 without a prefix
// extractor (MemTable::Update, UpdateCallback, CountSuccessiveMergeEntries
// and MemTableRep::Get, which the skip list overrides anyway): MemTable's
// own iterators ask for GetIterator, or, with a prefix extractor, for the
// dynamic prefix iterator, which is why a memtable created with one is the
// plain skip list. Of an iterator positioned by the index those callers read
// the entry, and CountSuccessiveMergeEntries steps on from it, for which the
// iterator then seeks the skip list to that entry. Keys are compared as
// bytes (the store's comparator; the memtable is made for no other), so
// equal keys hash alike. The filter and the index are written by the
// memtable's one writer (the factory refuses concurrent inserts), and the
// index is read by that writer only: every caller above is a write.
//
// The filter also answers reads (FilteredRep::Get, which MemTable's Get and
// MultiGet call) for a key it lacks, in place of RocksDB's own filter of the
// memtable's keys, which the store's options then leave out. Reads run on
// any thread, beside the writer: the filter's words are atomics, and each
// insert adds its key to the filter before the skip list links its entry,
// so that a read which can see the entry (by the sequence number RocksDB
// publishes after the insert, with release) sees its bits too. The index's
// size is an atomic too: RocksDB reads it from other threads.

#include "shim.h"
#include "capi.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "rocksdb/comparator.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/options.h"
#include "rocksdb/version.h"

// ROCKSDB_XXH3_64bits is XXH3_64bits of the xxHash RocksDB builds in,
// which its installed headers don't declare.
extern "C" uint64_t ROCKSDB_XXH3_64bits(const void* data, size_t len);

namespace {

// Hash is the hash of a user key which the filter and the index share:
// XXH3's, from the xxHash that RocksDB bundles and exports (under its
// ROCKSDB_ prefix), twice as fast as std::hash for a key of 1 KiB.
uint64_t Hash(std::string_view key) { return ROCKSDB_XXH3_64bits(key.data(), key.size()); }

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

  // Add sets the bits of the key of hash h; one thread at a time.
  void Add(uint64_t h) {
    std::atomic<uint64_t>* block = Block(h);
    for (int i = 0; i < kProbes; i++, h >>= 9) {
      std::atomic<uint64_t>& w = block[(h >> 6) & (kBlockWords - 1)];
      w.store(w.load(std::memory_order_relaxed) | (uint64_t{1} << (h & 63)), std::memory_order_relaxed);
    }
  }

  // MayContain is false only if no key of hash h was added.
  bool MayContain(uint64_t h) const {
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

// InternalKeyOfEntry returns the internal key of a memtable entry: its
// varint32 length, then the internal key.
std::string_view InternalKeyOfEntry(const char* entry) {
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
  return std::string_view(reinterpret_cast<const char*>(p), n);
}

// UserKeyOfEntry returns the user key of a memtable entry.
std::string_view UserKeyOfEntry(const char* entry) {
  std::string_view ikey = InternalKeyOfEntry(entry);
  return ikey.substr(0, ikey.size() >= 8 ? ikey.size() - 8 : 0);
}

// kLookupKeyKnown is whether rocksdb::LookupKey, which RocksDB's installed
// headers only declare, is known to be laid out as lookupKeyLayout: in
// RocksDB 7.8 (db/dbformat.h), as since LevelDB.
#if ROCKSDB_MAJOR == 7 && ROCKSDB_MINOR == 8
constexpr bool kLookupKeyKnown = true;
#else
constexpr bool kLookupKeyKnown = false;
#endif

// lookupKeyLayout is the layout of a rocksdb::LookupKey's fields: its
// memtable key (the internal key's varint32 length, then the internal key:
// the user key, then an 8-byte sequence number and type) from start to end,
// the internal key from kstart.
struct lookupKeyLayout {
  const char* start;
  const char* kstart;
  const char* end;
};

// UserKeyOfLookup sets *key to the user key k looks up, and returns true, if
// RocksDB's LookupKey is laid out as known and k's fields agree with each
// other as a memtable key's do; it returns false otherwise.
bool UserKeyOfLookup(const rocksdb::LookupKey& k, std::string_view* key) {
  if (!kLookupKeyKnown) {
    return false;
  }
  lookupKeyLayout l;
  std::memcpy(&l, &k, sizeof(l));
  if (l.start == nullptr || l.kstart <= l.start || l.end < l.kstart + 8 || l.kstart - l.start > 5) {
    return false;
  }
  std::string_view ikey = InternalKeyOfEntry(l.start);
  if (ikey.data() != l.kstart || ikey.size() != static_cast<size_t>(l.end - l.kstart)) {
    return false;
  }
  *key = ikey.substr(0, ikey.size() - 8);
  return true;
}

// KeyIndex maps user keys to the memtable entries of their latest versions:
// a table of slots probed linearly, each an entry's address (below 2^48)
// with 16 bits of its key's hash above it, or zero. It grows by doubling, up
// to a bound of bytes; full, it takes no more keys (it still moves those it
// holds to their later versions) and is then no longer complete. Given an
// entry whose address its slots can't hold, it drops what it holds and
// takes nothing more.
class KeyIndex {
 public:
  explicit KeyIndex(size_t max_bytes) : max_slots_(max_bytes / sizeof(uint64_t)) {}

  // Put makes entry, inserted last, the latest version of user key (of hash
  // h).
  void Put(std::string_view key, uint64_t h, const char* entry) {
    uint64_t addr = reinterpret_cast<uintptr_t>(entry);
    if (dropped_) {
      return;
    } else if ((addr >> kAddrBits) != 0) {
      // Not an address the slots can hold: the index goes, lest it keep an
      // earlier version of the key as the latest.
      std::vector<uint64_t>().swap(slots_);
      used_ = 0;
      complete_ = false;
      dropped_ = true;
      bytes_.store(0, std::memory_order_relaxed);
      return;
    }
    if (slots_.empty() && !Grow()) {
      complete_ = false;
      return;
    }
    uint64_t tag = Tag(h);
    for (size_t i = Home(h);; i = (i + 1) & (slots_.size() - 1)) {
      uint64_t slot = slots_[i];
      if (slot == 0) {
        if ((used_ + 1) * 4 > slots_.size() * 3) {  // Past three quarters full.
          if (!Grow()) {
            complete_ = false;
            return;
          }
          Place(h, tag | addr);
        } else {
          slots_[i] = tag | addr;
        }
        used_++;
        return;
      } else if ((slot & ~kAddrMask) == tag && UserKeyOfEntry(Entry(slot)) == key) {
        slots_[i] = tag | addr;
        return;
      }
    }
  }

  // Find returns the entry of the latest version of user key (of hash h), or
  // nullptr if the index doesn't hold it: then the memtable doesn't either,
  // if the index is complete.
  const char* Find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) {
      return nullptr;
    }
    uint64_t tag = Tag(h);
    for (size_t i = Home(h);; i = (i + 1) & (slots_.size() - 1)) {
      uint64_t slot = slots_[i];
      if (slot == 0) {
        return nullptr;
      } else if ((slot & ~kAddrMask) == tag && UserKeyOfEntry(Entry(slot)) == key) {
        return Entry(slot);
      }
    }
  }

  // Complete is whether the index holds every key put to it.
  bool Complete() const { return complete_; }

  // Bytes is the size of the index's slots; any thread may ask.
  size_t Bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kAddrBits = 48;
  static constexpr uint64_t kAddrMask = (uint64_t{1} << kAddrBits) - 1;
  static constexpr size_t kFirstSlots = 1024;

  static uint64_t Tag(uint64_t h) { return h & ~kAddrMask; }
  static const char* Entry(uint64_t slot) { return reinterpret_cast<const char*>(static_cast<uintptr_t>(slot & kAddrMask)); }

  // Home is the first slot probed for hash h: the high bits of its product
  // with a constant.
  size_t Home(uint64_t h) const { return static_cast<size_t>((h * 0xC2B2AE3D27D4EB4Full) >> shift_); }

  // Place puts slot, of a key of hash h which the index doesn't hold, in
  // the first free slot from its home.
  void Place(uint64_t h, uint64_t slot) {
    size_t i = Home(h);
    while (slots_[i] != 0) {
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = slot;
  }

  // Grow doubles the slots (or makes the first), moving those held; it
  // returns false if they would pass the index's bound.
  bool Grow() {
    size_t n = slots_.size() * 2;
    if (slots_.empty()) {
      for (n = kFirstSlots; n > max_slots_;) {
        n /= 2;  // A small index: as many slots as fit.
      }
    }
    if (n < 2 || n > max_slots_) {
      return false;  // Too small to index anything.
    }
    std::vector<uint64_t> old(n, 0);
    old.swap(slots_);
    shift_ = 64 - __builtin_ctzll(n);
    for (uint64_t slot : old) {
      if (slot != 0) {
        Place(Hash(UserKeyOfEntry(Entry(slot))), slot);
      }
    }
    bytes_.store(n * sizeof(uint64_t), std::memory_order_relaxed);
    return true;
  }

  const size_t max_slots_;
  std::vector<uint64_t> slots_;  // A power of two of them, or none.
  int shift_ = 64;
  size_t used_ = 0;
  bool complete_ = true;
  bool dropped_ = false;  // It met an address it can't hold, and holds nothing.
  std::atomic<size_t> bytes_{0};
};

// KeyLookup is what an iterator of a FilteredRep asks of it.
class KeyLookup {
 public:
  virtual ~KeyLookup() = default;
  // Latest returns the entry of the latest version of the user key of
  // internal_key if the memtable holds it, and sets *absent if the memtable
  // certainly doesn't hold it; if neither, the skip list must be searched.
  virtual const char* Latest(const rocksdb::Slice& internal_key, bool* absent) const = 0;
};

// FilteredIterator is an iterator of the skip list whose Seek answers at
// once for a key the filter lacks, or the index holds.
class FilteredIterator : public rocksdb::MemTableRep::Iterator {
 public:
  FilteredIterator(rocksdb::MemTableRep::Iterator* it, const KeyLookup* lookup) : it_(it), lookup_(lookup) {}

  bool Valid() const override { return found_ != nullptr || (!absent_ && it_->Valid()); }
  const char* key() const override { return found_ != nullptr ? found_ : it_->key(); }
  void Next() override {
    Position();
    it_->Next();
  }
  void Prev() override {
    Position();
    it_->Prev();
  }
  void Seek(const rocksdb::Slice& internal_key, const char* memtable_key) override {
    found_ = lookup_->Latest(internal_key, &absent_);
    if (found_ == nullptr && !absent_) {
      it_->Seek(internal_key, memtable_key);
    }
  }
  void SeekForPrev(const rocksdb::Slice& internal_key, const char* memtable_key) override {
    Reset();
    it_->SeekForPrev(internal_key, memtable_key);
  }
  void RandomSeek() override {
    Reset();
    it_->RandomSeek();
  }
  void SeekToFirst() override {
    Reset();
    it_->SeekToFirst();
  }
  void SeekToLast() override {
    Reset();
    it_->SeekToLast();
  }

 private:
  void Reset() {
    found_ = nullptr;
    absent_ = false;
  }

  // Position seeks the skip list to the entry the index found, if it did,
  // for the iterator to step from it.
  void Position() {
    if (found_ != nullptr) {
      std::string_view ikey = InternalKeyOfEntry(found_);
      it_->Seek(rocksdb::Slice(ikey.data(), ikey.size()), found_);
      found_ = nullptr;
    }
  }

  std::unique_ptr<rocksdb::MemTableRep::Iterator> it_;
  const KeyLookup* lookup_;
  bool absent_ = false;
  const char* found_ = nullptr;  // Where the index positioned the iterator.
};

// FilteredRep is a skip list memtable, the filter of its keys and their
// index.
class FilteredRep : public rocksdb::MemTableRep, public KeyLookup {
 public:
  FilteredRep(rocksdb::MemTableRep* list, rocksdb::Allocator* allocator, size_t filter_bytes, size_t index_bytes)
      : MemTableRep(allocator), list_(list), filter_(filter_bytes), index_(index_bytes) {}

  rocksdb::KeyHandle Allocate(const size_t len, char** buf) override { return list_->Allocate(len, buf); }
  void Insert(rocksdb::KeyHandle handle) override {
    uint64_t h = Add(handle);
    list_->Insert(handle);
    Index(handle, h);
  }
  bool InsertKey(rocksdb::KeyHandle handle) override {
    uint64_t h = Add(handle);
    bool ok = list_->InsertKey(handle);
    if (ok) {
      Index(handle, h);
    }
    return ok;
  }
  void InsertWithHint(rocksdb::KeyHandle handle, void** hint) override {
    uint64_t h = Add(handle);
    list_->InsertWithHint(handle, hint);
    Index(handle, h);
  }
  bool InsertKeyWithHint(rocksdb::KeyHandle handle, void** hint) override {
    uint64_t h = Add(handle);
    bool ok = list_->InsertKeyWithHint(handle, hint);
    if (ok) {
      Index(handle, h);
    }
    return ok;
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
  // Get answers at once for a key the filter lacks: the memtable holds no
  // version of it, at any sequence number. Its index isn't asked: a read's
  // latest visible version may be older than the key's latest.
  void Get(const rocksdb::LookupKey& k, void* callback_args,
           bool (*callback_func)(void* arg, const char* entry)) override {
    std::string_view key;
    if (UserKeyOfLookup(k, &key) && !filter_.MayContain(Hash(key))) {
      return;
    }
    list_->Get(k, callback_args, callback_func);
  }
  uint64_t ApproximateNumEntries(const rocksdb::Slice& start_ikey, const rocksdb::Slice& end_ikey) override {
    return list_->ApproximateNumEntries(start_ikey, end_ikey);
  }
  void UniqueRandomSample(const uint64_t num_entries, const uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override {
    list_->UniqueRandomSample(num_entries, target_sample_size, entries);
  }
  size_t ApproximateMemoryUsage() override {
    return list_->ApproximateMemoryUsage() + filter_.Bytes() + index_.Bytes();
  }
  Iterator* GetIterator(rocksdb::Arena* arena) override { return list_->GetIterator(arena); }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    if (arena != nullptr) {
      // An arena's iterators are destroyed in place: only the list's own.
      // (No caller of RocksDB 7.8 passes one without a prefix extractor.)
      return list_->GetDynamicPrefixIterator(arena);
    }
    return new FilteredIterator(list_->GetDynamicPrefixIterator(nullptr), this);
  }
  bool IsMergeOperatorSupported() const override { return list_->IsMergeOperatorSupported(); }
  bool IsSnapshotSupported() const override { return list_->IsSnapshotSupported(); }

  const char* Latest(const rocksdb::Slice& internal_key, bool* absent) const override {
    std::string_view key = UserKeyOf(internal_key);
    uint64_t h = Hash(key);
    if (!filter_.MayContain(h)) {
      *absent = true;
      return nullptr;
    }
    const char* entry = index_.Find(key, h);
    *absent = entry == nullptr && index_.Complete();
    return entry;
  }

 private:
  // Add adds the key of handle to the filter, and returns its hash.
  uint64_t Add(rocksdb::KeyHandle handle) {
    uint64_t h = Hash(UserKeyOfEntry(static_cast<const char*>(handle)));
    filter_.Add(h);
    return h;
  }
  // Index makes handle, inserted, the latest version of its key.
  void Index(rocksdb::KeyHandle handle, uint64_t h) {
    const char* entry = static_cast<const char*>(handle);
    index_.Put(UserKeyOfEntry(entry), h, entry);
  }

  std::unique_ptr<rocksdb::MemTableRep> list_;
  KeyFilter filter_;
  KeyIndex index_;
};

// FilteredSkipListFactory makes FilteredReps, each with a filter of ratio
// times the memtables' size (at least min_bytes), and an index of at most
// index_ratio times it.
class FilteredSkipListFactory : public rocksdb::MemTableRepFactory {
 public:
  FilteredSkipListFactory(double ratio, size_t min_bytes, double index_ratio, size_t write_buffer_size)
      : ratio_(ratio), min_bytes_(min_bytes), index_ratio_(index_ratio), write_buffer_size_(write_buffer_size) {}

  static const char* kClassName() { return "GazconsumerFilteredSkipListFactory"; }
  const char* Name() const override { return kClassName(); }

  // Resize sizes the filters and indexes of the memtables made from now on
  // for memtables of write_buffer_size bytes.
  void Resize(size_t write_buffer_size) { write_buffer_size_.store(write_buffer_size, std::memory_order_relaxed); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& cmp,
                                          rocksdb::Allocator* allocator, const rocksdb::SliceTransform* transform,
                                          rocksdb::Logger* logger) override {
    rocksdb::MemTableRep* list = list_.CreateMemTableRep(cmp, allocator, transform, logger);
    if (transform != nullptr) {
      return list;  // Its dynamic prefix iterators also seek ranges: see above.
    }
    size_t size = write_buffer_size_.load(std::memory_order_relaxed);
    size_t filter_bytes = std::max(min_bytes_, static_cast<size_t>(static_cast<double>(size) * ratio_));
    return new FilteredRep(list, allocator, filter_bytes, static_cast<size_t>(static_cast<double>(size) * index_ratio_));
  }

  bool IsInsertConcurrentlySupported() const override { return false; }
  bool CanHandleDuplicatedKey() const override { return list_.CanHandleDuplicatedKey(); }

 private:
  rocksdb::SkipListFactory list_;
  const double ratio_;
  const size_t min_bytes_;
  const double index_ratio_;
  std::atomic<size_t> write_buffer_size_;
};

// FilteredFactoryOf returns the FilteredSkipListFactory of o, or nullptr.
FilteredSkipListFactory* FilteredFactoryOf(const rocksdb::Options& o) {
  if (o.memtable_factory == nullptr || std::strcmp(o.memtable_factory->Name(), FilteredSkipListFactory::kClassName()) != 0) {
    return nullptr;
  }
  return static_cast<FilteredSkipListFactory*>(o.memtable_factory.get());
}

}  // namespace

extern "C" int gc_options_set_filtered_memtable(void* c_opts, double ratio, size_t min_bytes, double index_ratio) {
  rocksdb::Options& o = static_cast<rocksdb_options_t*>(c_opts)->rep;
  if (!o.inplace_update_support || o.allow_concurrent_memtable_write || o.memtable_factory == nullptr ||
      std::strcmp(o.memtable_factory->Name(), rocksdb::SkipListFactory::kClassName()) != 0) {
    return 0;
  }
  // Equal keys must be equal bytes, which the filter and index hash.
  if (o.comparator != rocksdb::BytewiseComparator() && o.comparator != rocksdb::ReverseBytewiseComparator()) {
    return 0;
  }
  o.memtable_factory = std::make_shared<FilteredSkipListFactory>(ratio, min_bytes, index_ratio, o.write_buffer_size);
  if (kLookupKeyKnown && o.prefix_extractor == nullptr) {
    // The memtables' Gets ask their filter (FilteredRep::Get): RocksDB's
    // own filter of their keys would only hash each key once more, on
    // every write and read.
    o.memtable_prefix_bloom_size_ratio = 0;
  }
  return 1;
}

extern "C" void gc_options_resize_filtered_memtable(void* c_opts, size_t write_buffer_size) {
  if (FilteredSkipListFactory* f = FilteredFactoryOf(static_cast<rocksdb_options_t*>(c_opts)->rep)) {
    f->Resize(write_buffer_size);
  }
}
