//===- TokenizerModels.cpp - BPE and WordPiece ----------------------------===//
//
// Part of xfmr.
//
// The models of tokenizer.json (tokenizers/src/models/{bpe,wordpiece}).
//
// BPE merges a word with a priority queue over adjacent pairs (lowest merge
// rank first, then leftmost), pairs looked up by their two ids in a hash
// map: O(n log n) in the word length, the same result as tokenizers'
// Word::merge_all. WordPiece matches greedily, longest first. Words repeat,
// so both models keep words' ids in a cache shared by all threads: 64
// shards, each a mutex and a bounded hash map (a shard that fills up starts
// over), so that concurrent encodes rarely wait on each other.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>

#include <sys/mman.h>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

namespace {

//===----------------------------------------------------------------------===//
// Vocabulary
//===----------------------------------------------------------------------===//

/// A 64-bit hash of a short string (8 bytes at a time).
uint64_t hashWord(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, s.data() + i, 8);
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  // The last 0-7 bytes in at most two loads, which may overlap (the length
  // is in the seed): a memcpy of a variable length went through the stack
  // and stalled the load after it, a quarter of a cached word's time.
  const auto *p = reinterpret_cast<const unsigned char *>(s.data() + i);
  size_t rest = s.size() - i;
  uint64_t v = 0;
  if (rest >= 4) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + rest - 4, 4);
    v = lo | uint64_t(hi) << 32;
  } else if (rest > 0) {
    v = p[0] | uint64_t(p[rest / 2]) << 8 | uint64_t(p[rest - 1]) << 16;
  }
  h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

/// Strings (owned elsewhere, never moved) to ids: open addressing with the
/// hash kept in the slot, so that a probe compares strings only on a likely
/// hit. std::unordered_map's node per entry and byte-at-a-time hash were
/// most of WordPiece's time, which looks up every prefix of a word. Most
/// of those lookups miss: a Bloom filter (32 bits or more a key, two of
/// them set, under 1% false positives; 128 KiB for BERT's vocabulary) that
/// stays in the L2 cache answers them without touching the table.
class StringIdMap {
public:
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2)
      capacity *= 2;
    slots.assign(capacity, Slot());
    used = 0;
  }
  /// Adds `key` unless present (the first id stays).
  void insert(std::string_view key, int32_t id) {
    if ((used + 1) * 2 > slots.size())
      grow();
    uint64_t hash = hashWord(key);
    size_t i = hash & (slots.size() - 1);
    for (;; i = (i + 1) & (slots.size() - 1)) {
      Slot &slot = slots[i];
      if (slot.id < 0)
        break;
      if (slot.hash == hash && slot.view() == key)
        return;
    }
    slots[i] = {key.data(), static_cast<uint32_t>(key.size()), id, hash};
    ++used;
    maxLength = std::max(maxLength, key.size());
    addToFilter(hash);
  }
  int32_t find(std::string_view key) const {
    if (used == 0 || key.size() > maxLength)
      return -1;
    uint64_t hash = hashWord(key);
    if (!inFilter(hash))
      return -1;
    for (size_t i = hash & (slots.size() - 1);;
         i = (i + 1) & (slots.size() - 1)) {
      const Slot &slot = slots[i];
      if (slot.id < 0)
        return -1;
      if (slot.hash == hash && slot.view() == key)
        return slot.id;
    }
  }
  size_t size() const { return used; }
  /// The longest key's length in bytes.
  size_t longest() const { return maxLength; }

private:
  struct Slot {
    const char *data = nullptr;
    uint32_t length = 0;
    int32_t id = -1; // -1: empty
    uint64_t hash = 0;
    std::string_view view() const { return {data, length}; }
  };
  void grow() {
    std::vector<Slot> old = std::move(slots);
    reserve(std::max<size_t>(old.size(), 8));
    for (const Slot &slot : old)
      if (slot.id >= 0)
        insert(slot.view(), slot.id);
  }
  /// The filter's two bits: from the hash's high half, which the table's
  /// index (the low bits) does not use.
  std::pair<size_t, size_t> filterBits(uint64_t hash) const {
    size_t mask = filter.size() * 64 - 1;
    return {size_t(hash >> 32) & mask, size_t(hash >> 45) & mask};
  }
  void addToFilter(uint64_t hash) {
    if (filter.size() * 4 < slots.size()) {
      // Rebuilt as the table grows: 16 bits a slot, 32 or more a key.
      filter.assign(slots.size() / 4, 0);
      for (const Slot &slot : slots)
        if (slot.id >= 0)
          addToFilter(slot.hash);
    }
    auto [a, b] = filterBits(hash);
    filter[a / 64] |= uint64_t(1) << (a % 64);
    filter[b / 64] |= uint64_t(1) << (b % 64);
  }
  bool inFilter(uint64_t hash) const {
    auto [a, b] = filterBits(hash);
    return (filter[a / 64] >> (a % 64)) & (filter[b / 64] >> (b % 64)) & 1;
  }
  std::vector<Slot> slots;
  std::vector<uint64_t> filter;
  size_t used = 0, maxLength = 0;
};

/// Token strings and ids in both directions.
class Vocabulary {
public:
  /// Reads a {"token": id, ...} object.
  Status parse(const JsonReader &reader, const json &vocab,
               const std::string &path) {
    if (!vocab.is_object())
      return reader.fail(path, std::string("expected an object, got ") +
                                   vocab.type_name());
    size_t count = vocab.size();
    int64_t limit = std::max<int64_t>(int64_t(count) * 8, int64_t(1) << 20);
    keys.reserve(count);
    idOf.reserve(count);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      Expected<int64_t> id =
          reader.asInteger(it.value(), path + "." + it.key());
      if (!id)
        return id.takeError();
      if (*id < 0 || *id >= limit)
        return reader.fail(path + "." + it.key(),
                           "id " + std::to_string(*id) + " is out of range");
      keys.push_back(it.key());
      idOf.insert(keys.back(), static_cast<int32_t>(*id));
      if (size_t(*id) >= tokenOf.size())
        tokenOf.resize(size_t(*id) + 1, -1);
      if (tokenOf[size_t(*id)] < 0)
        tokenOf[size_t(*id)] = static_cast<int32_t>(keys.size() - 1);
    }
    return Status();
  }

  int32_t find(std::string_view token) const { return idOf.find(token); }
  const std::string *token(int64_t id) const {
    if (id < 0 || size_t(id) >= tokenOf.size() || tokenOf[size_t(id)] < 0)
      return nullptr;
    return &keys[size_t(tokenOf[size_t(id)])];
  }
  /// Every token string (possibly with duplicates of an id).
  const std::vector<std::string> &tokens() const { return keys; }
  const StringIdMap &ids() const { return idOf; }
  size_t size() const { return idOf.size(); }
  int64_t idLimit() const { return int64_t(tokenOf.size()); }

private:
  std::vector<std::string> keys; // reserved up front: views stay valid
  StringIdMap idOf;
  std::vector<int32_t> tokenOf; // id -> index in keys
};

//===----------------------------------------------------------------------===//
// Word cache
//===----------------------------------------------------------------------===//

/// Words' ids by their text, shared by the threads that encode: 64
/// shards, each under its own mutex an open-addressing table of 64-byte
/// slots and an arena for the entries (word, then ids) too long to sit in
/// their slot; a shard starts over when its table is half full (32,768
/// words in all) or its arena full. A hit on a short word reads one cache
/// line. The slots of all shards are one anonymous mapping of 4 MiB,
/// within the TLB's reach in 4 KiB pages (twice that missed it; transparent
/// huge pages fixed that but made a first pass sometimes wait for the
/// kernel to compact memory), populated when the model loads (1.7 ms)
/// rather than by a page fault per slot page in the first encodes.
class WordCache {
public:
  /// Longer words are tokenized every time.
  static constexpr size_t kMaxWordBytes = 256;

  WordCache() = default;
  /// Maps the slots; until then (or if that fails) every word is
  /// tokenized. Called once a model has loaded, so that a file refused
  /// halfway costs nothing.
  void allocate() {
    if (slots)
      return;
    void *p = ::mmap(nullptr, kSlotBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p != MAP_FAILED)
      slots = static_cast<Slot *>(p);
  }
  ~WordCache() {
    if (slots)
      ::munmap(slots, kSlotBytes);
  }
  WordCache(const WordCache &) = delete;
  WordCache &operator=(const WordCache &) = delete;

  bool lookup(std::string_view word, uint64_t hash,
              std::vector<int64_t> &out) const {
    if (!slots)
      return false;
    size_t index = shardOf(hash);
    Shard &shard = shards[index];
    const Slot *table = slots + index * kSlots;
    std::lock_guard<std::mutex> lock(shard.mutex);
    for (size_t i = slotOf(hash);; i = (i + 1) & (kSlots - 1)) {
      const Slot &slot = table[i];
      if (!slot.hash)
        return false;
      if (slot.hash != hash || slot.wordLen != word.size())
        continue;
      const char *entry = entryOf(shard, slot);
      if (std::memcmp(entry, word.data(), word.size()) != 0)
        continue;
      // push_back rather than resize: resize's zero fill is a call of its
      // own (the ids were reserved for the whole text).
      const char *ids = entry + slot.wordLen;
      for (size_t k = 0; k < slot.idCount; ++k) {
        int32_t id;
        std::memcpy(&id, ids + 4 * k, 4);
        out.push_back(id);
      }
      return true;
    }
  }

  void insert(std::string_view word, uint64_t hash, const int64_t *ids,
              size_t n) const {
    size_t bytes = word.size() + 4 * n;
    if (!slots || word.size() >= kMaxWordBytes || bytes > kArenaBytes / 16)
      return;
    size_t index = shardOf(hash);
    Shard &shard = shards[index];
    Slot *table = slots + index * kSlots;
    std::lock_guard<std::mutex> lock(shard.mutex);
    bool fits = bytes <= sizeof(Slot::data);
    if (shard.used >= kSlots / 2 ||
        (!fits && shard.arena.size() + bytes > kArenaBytes)) {
      std::memset(static_cast<void *>(table), 0, kSlots * sizeof(Slot));
      shard.used = 0;
      shard.arena.clear();
    }
    size_t i = slotOf(hash);
    while (table[i].hash)
      i = (i + 1) & (kSlots - 1);
    Slot &slot = table[i];
    slot.hash = hash;
    slot.wordLen = static_cast<uint16_t>(word.size());
    slot.idCount = static_cast<uint16_t>(n);
    char *entry = slot.data;
    if (!fits) {
      if (shard.arena.capacity() == 0)
        shard.arena.reserve(kArenaBytes);
      slot.arenaOffset = static_cast<uint32_t>(shard.arena.size());
      shard.arena.resize(shard.arena.size() + bytes);
      entry = shard.arena.data() + slot.arenaOffset;
    }
    std::memcpy(entry, word.data(), word.size());
    for (size_t k = 0; k < n; ++k) {
      int32_t id = static_cast<int32_t>(ids[k]);
      std::memcpy(entry + word.size() + 4 * k, &id, 4);
    }
    ++shard.used;
  }

  /// The hash lookup and insert take; never 0 (an empty slot).
  static uint64_t hash(std::string_view word) { return hashWord(word) | 1; }

  /// Starts loading the slot where the lookup of `hash` begins.
  void prefetch(uint64_t hash) const {
    if (slots)
      __builtin_prefetch(slots + shardOf(hash) * kSlots + slotOf(hash));
  }

private:
  static constexpr unsigned kShardBits = 6;
  static constexpr size_t kShards = size_t(1) << kShardBits;
  static constexpr size_t kSlots = 1024;
  /// Per shard: the entries that do not fit in their slot, 4 KiB at most
  /// each.
  static constexpr size_t kArenaBytes = 64 * 1024;
  struct alignas(64) Slot {
    uint64_t hash; // 0: empty
    uint16_t wordLen, idCount;
    uint32_t arenaOffset;
    /// The entry when it fits: the word's bytes, then its ids as int32.
    char data[48];
  };
  static_assert(sizeof(Slot) == 64, "one cache line per slot");
  static constexpr size_t kSlotBytes = kShards * kSlots * sizeof(Slot);
  struct Shard {
    std::mutex mutex;
    size_t used = 0;
    std::vector<char> arena;
  };

  static size_t shardOf(uint64_t hash) { return hash >> (64 - kShardBits); }
  /// The first slot to probe: not bit 0, which hash() sets, nor the top
  /// bits, which pick the shard.
  static size_t slotOf(uint64_t hash) { return (hash >> 1) & (kSlots - 1); }
  static const char *entryOf(const Shard &shard, const Slot &slot) {
    size_t bytes = slot.wordLen + size_t(4) * slot.idCount;
    return bytes <= sizeof(Slot::data) ? slot.data
                                       : shard.arena.data() + slot.arenaOffset;
  }

  Slot *slots = nullptr;
  mutable std::array<Shard, kShards> shards;
};

//===----------------------------------------------------------------------===//
// Merges
//===----------------------------------------------------------------------===//

/// What merging a pair of ids gives.
struct MergeRule {
  int32_t rank, newId;
};

/// (left id, right id) -> merge rule: open addressing over 16-byte slots,
/// one probe a cache line, where std::unordered_map chased a node pointer
/// for each of the lookups a merged word makes.
class PairMap {
public:
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2)
      capacity *= 2;
    slots.assign(capacity, Slot());
    shift = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    used = 0;
  }
  /// Sets the rule of (a, b), replacing an earlier one.
  void assign(int32_t a, int32_t b, MergeRule rule) {
    if ((used + 1) * 2 > slots.size())
      grow();
    uint64_t key = keyOf(a, b);
    size_t i = indexOf(key);
    while (slots[i].key != kEmpty && slots[i].key != key)
      i = (i + 1) & (slots.size() - 1);
    if (slots[i].key == kEmpty)
      ++used;
    slots[i] = {key, rule};
  }
  const MergeRule *find(int32_t a, int32_t b) const {
    uint64_t key = keyOf(a, b);
    for (size_t i = indexOf(key);; i = (i + 1) & (slots.size() - 1)) {
      const Slot &slot = slots[i];
      if (slot.key == key)
        return &slot.rule;
      if (slot.key == kEmpty)
        return nullptr;
    }
  }

private:
  /// Ids are never negative, so no pair has this key.
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key = kEmpty;
    MergeRule rule{0, 0};
  };
  static uint64_t keyOf(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  size_t indexOf(uint64_t key) const {
    return size_t((key * 0x9E3779B97F4A7C15ull) >> shift);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots);
    reserve(std::max<size_t>(old.size(), 8));
    for (const Slot &slot : old)
      if (slot.key != kEmpty)
        assign(int32_t(slot.key >> 32), int32_t(uint32_t(slot.key)), slot.rule);
  }
  std::vector<Slot> slots = std::vector<Slot>(16);
  unsigned shift = 60;
  size_t used = 0;
};

//===----------------------------------------------------------------------===//
// Cached models
//===----------------------------------------------------------------------===//

/// A model whose words' ids go through a word cache: a word repeats, and
/// its ids are a function of its text.
class CachedModel : public Model {
public:
  void tokenize(std::string_view word,
                std::vector<int64_t> &out) const override {
    tokenizeHashed(word, cacheable(word) ? WordCache::hash(word) : 0, out);
  }
  void tokenizeAll(const std::vector<Piece> &pieces,
                   std::vector<int64_t> &out) const override;
  /// Starts caching (after a successful parse).
  void enableCache() { cache.allocate(); }

protected:
  /// Appends the ids of a word the cache does not have.
  virtual void tokenizeUncached(std::string_view word,
                                std::vector<int64_t> &out) const = 0;

private:
  static bool cacheable(std::string_view word) {
    return word.size() < WordCache::kMaxWordBytes;
  }
  /// tokenize() with the word's cache hash, 0 if not cacheable.
  void tokenizeHashed(std::string_view word, uint64_t hash,
                      std::vector<int64_t> &out) const;

  WordCache cache;
};

void CachedModel::tokenizeHashed(std::string_view word, uint64_t hash,
                                 std::vector<int64_t> &out) const {
  if (!hash) {
    tokenizeUncached(word, out);
    return;
  }
  if (cache.lookup(word, hash, out))
    return;
  size_t mark = out.size();
  tokenizeUncached(word, out);
  cache.insert(word, hash, out.data() + mark, out.size() - mark);
}

void CachedModel::tokenizeAll(const std::vector<Piece> &pieces,
                              std::vector<int64_t> &out) const {
  // The cache slots of the next words load while this one is looked up:
  // each lookup is a miss to the L3 cache or memory, and one at a time
  // they were most of a cached word's time.
  constexpr size_t kAhead = 6;
  thread_local std::vector<uint64_t> hashes;
  hashes.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string &text = pieces[i].text;
    hashes[i] = cacheable(text) ? WordCache::hash(text) : 0;
    if (i < kAhead && hashes[i])
      cache.prefetch(hashes[i]);
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i + kAhead < pieces.size() && hashes[i + kAhead])
      cache.prefetch(hashes[i + kAhead]);
    if (!pieces[i].text.empty())
      tokenizeHashed(pieces[i].text, hashes[i], out);
  }
}

/// A cached model whose ids are those of a Vocabulary (BPE, WordPiece).
class VocabularyModel : public CachedModel {
public:
  std::optional<int64_t> tokenToId(std::string_view token) const override {
    int32_t id = vocab.find(token);
    return id < 0 ? std::nullopt : std::optional<int64_t>(id);
  }
  const std::string *idToToken(int64_t id) const override {
    return vocab.token(id);
  }
  size_t size() const override { return vocab.size(); }
  int64_t idLimit() const override { return vocab.idLimit(); }

protected:
  Vocabulary vocab;
};

//===----------------------------------------------------------------------===//
// BPE
//===----------------------------------------------------------------------===//

class BpeModel : public VocabularyModel {
public:
  Status parse(const JsonReader &reader, const json &node,
               const std::string &path);


protected:
  void tokenizeUncached(std::string_view word,
                        std::vector<int64_t> &out) const override;

private:
  /// merge_word of tokenizers/src/models/bpe/model.rs.
  void mergeWord(std::string_view word, std::vector<int64_t> &out) const;
  /// Words of at most this many symbols merge without the heap.
  static constexpr size_t kShortWord = 64;
  /// mergeWord's merges for a short word: a scan for the lowest rank
  /// instead of a heap (no pushes, pops or stale entries, and no lookup
  /// to check an entry is still current).
  void mergeShortWord(const int32_t *symbols, size_t count,
                      std::vector<int64_t> &out) const;
  /// The id of the character word[start, end), with the subword prefix
  /// and word suffix where they apply; -1 if none.
  int32_t characterId(std::string_view word, size_t start, size_t end,
                      std::string &scratch) const;

  /// The ids of the one- and two-byte characters (every character of a
  /// byte-level word) as tokens of their own, or -1.
  std::array<int32_t, 0x800> smallCharIds;
  PairMap merges;
  std::optional<std::string> unkToken, prefix, suffix;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  std::array<int32_t, 256> byteIds{};
};

Status BpeModel::parse(const JsonReader &reader, const json &node,
                       const std::string &path) {
  const json *dropout = JsonReader::find(node, "dropout");
  if (dropout && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0))
    return reader.fail(JsonReader::join(path, "dropout"),
                       "BPE dropout is not supported (must be null)");
  const json *vocabNode = JsonReader::find(node, "vocab");
  if (!vocabNode)
    return reader.fail(JsonReader::join(path, "vocab"), "missing");
  if (Status s =
          vocab.parse(reader, *vocabNode, JsonReader::join(path, "vocab"));
      !s)
    return s;

  auto optional = [&](const char *key,
                      std::optional<std::string> &dst) -> Status {
    if (!JsonReader::has(node, key))
      return Status();
    Expected<std::string> v = reader.string(node, path, key);
    if (!v)
      return v.takeError();
    dst = v.take();
    return Status();
  };
  for (auto [key, dst] : {std::pair{"unk_token", &unkToken},
                          std::pair{"continuing_subword_prefix", &prefix},
                          std::pair{"end_of_word_suffix", &suffix}})
    if (Status s = optional(key, *dst); !s)
      return s;
  for (auto [key, dst] : {std::pair{"fuse_unk", &fuseUnk},
                          std::pair{"byte_fallback", &byteFallback},
                          std::pair{"ignore_merges", &ignoreMerges}}) {
    Expected<bool> v = reader.boolean(node, path, key, false);
    if (!v)
      return v.takeError();
    *dst = *v;
  }
  for (char32_t c = 0; c < smallCharIds.size(); ++c) {
    std::string text;
    appendUtf8(text, c);
    smallCharIds[c] = vocab.find(text);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byteIds[size_t(b)] = vocab.find(name);
  }

  Expected<const json *> list = reader.array(node, path, "merges");
  if (!list)
    return list.takeError();
  size_t prefixLen = prefix ? prefix->size() : 0;
  std::string mergesPath = JsonReader::join(path, "merges");
  int32_t rank = 0;
  merges.reserve((*list)->size());
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const json &m = (**list)[i];
    std::string p = JsonReader::index(mergesPath, i);
    std::string a, b;
    if (m.is_string()) {
      const std::string &line = m.get_ref<const std::string &>();
      if (line.rfind("#version", 0) == 0)
        continue;
      size_t space = line.find(' ');
      if (space == std::string::npos ||
          line.find(' ', space + 1) != std::string::npos)
        return reader.fail(p, "expected \"left right\"");
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
               m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return reader.fail(p, "expected \"left right\" or [left, right]");
    }
    int32_t aId = vocab.find(a), bId = vocab.find(b);
    if (aId < 0 || bId < 0)
      return reader.fail(p, "token '" + (aId < 0 ? a : b) +
                                "' is not in the vocabulary");
    if (b.size() < prefixLen)
      return reader.fail(p, "'" + b + "' is shorter than the subword prefix");
    std::string merged = a + b.substr(prefixLen);
    int32_t newId = vocab.find(merged);
    if (newId < 0)
      return reader.fail(p, "merged token '" + merged +
                                "' is not in the vocabulary");
    merges.assign(aId, bId, {rank++, newId});
  }
  return Status();
}

void BpeModel::tokenizeUncached(std::string_view word,
                                std::vector<int64_t> &out) const {
  if (ignoreMerges) {
    int32_t id = vocab.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  mergeWord(word, out);
}

int32_t BpeModel::characterId(std::string_view word, size_t start, size_t end,
                              std::string &scratch) const {
  bool withPrefix = start != 0 && prefix && !prefix->empty();
  bool withSuffix = end == word.size() && suffix && !suffix->empty();
  if (!withPrefix && !withSuffix) {
    auto lead = static_cast<unsigned char>(word[start]);
    if (end - start == 1)
      return smallCharIds[lead];
    if (end - start == 2 && lead >= 0xC2 && lead < 0xE0)
      return smallCharIds[(size_t(lead & 0x1F) << 6) |
                          (static_cast<unsigned char>(word[start + 1]) & 0x3F)];
    return vocab.find(word.substr(start, end - start));
  }
  scratch.clear();
  if (withPrefix)
    scratch += *prefix;
  scratch.append(word.substr(start, end - start));
  if (withSuffix)
    scratch += *suffix;
  return vocab.find(scratch);
}

namespace {
/// A symbol of a word being merged: a doubly linked list in an array.
struct Symbol {
  int32_t id, prev, next;
  bool alive;
};
/// A candidate merge of the symbol at `pos` with its next one.
struct PendingMerge {
  /// rank, then pos, in one number: the heap compares it alone.
  uint64_t order;
  int32_t newId;
  PendingMerge(int32_t rank, int32_t pos, int32_t newId)
      : order((uint64_t(uint32_t(rank)) << 32) | uint32_t(pos)), newId(newId) {}
  int32_t pos() const { return int32_t(uint32_t(order)); }
  /// The heap's order: the largest comes out first, so invert for lowest
  /// rank, then leftmost position.
  bool operator<(const PendingMerge &o) const { return order > o.order; }
};
/// mergeWord's arrays, kept per thread: a merged word allocates nothing.
struct MergeScratch {
  std::vector<int32_t> ids;
  std::vector<Symbol> symbols;
  std::vector<PendingMerge> heap;
  std::string piece;
};
thread_local MergeScratch mergeScratch;
} // namespace

void BpeModel::mergeShortWord(const int32_t *symbols, size_t count,
                              std::vector<int64_t> &out) const {
  // The symbols and the rule of each with the next, kept packed as they
  // merge: the lowest rank, leftmost first, is the heap's order (a rank is
  // one pair's, so the leftmost of equal ranks is the lowest position).
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  int32_t ids[kShortWord];
  MergeRule rules[kShortWord];
  auto ruleOf = [&](int32_t a, int32_t b) {
    const MergeRule *m = merges.find(a, b);
    return m ? *m : MergeRule{kNone, -1};
  };
  for (size_t k = 0; k < count; ++k)
    ids[k] = symbols[k];
  for (size_t k = 0; k + 1 < count; ++k)
    rules[k] = ruleOf(ids[k], ids[k + 1]);
  while (count > 1) {
    size_t best = 0;
    for (size_t k = 1; k + 1 < count; ++k)
      if (rules[k].rank < rules[best].rank)
        best = k;
    if (rules[best].rank == kNone)
      break;
    ids[best] = rules[best].newId;
    // Symbol best + 1 is gone, and with it the rule after it.
    for (size_t k = best + 1; k + 1 < count; ++k) {
      ids[k] = ids[k + 1];
      rules[k] = rules[k + 1];
    }
    --count;
    if (best > 0)
      rules[best - 1] = ruleOf(ids[best - 1], ids[best]);
    if (best + 1 < count)
      rules[best] = ruleOf(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + count);
}

void BpeModel::mergeWord(std::string_view word,
                         std::vector<int64_t> &out) const {
  MergeScratch &scratch = mergeScratch;
  std::vector<int32_t> &ids = scratch.ids;
  ids.clear();
  auto add = [&](int32_t id) { ids.push_back(id); };

  // The initial symbols: one per character, unknown ones as bytes or unk.
  int32_t unkId = unkToken ? vocab.find(*unkToken) : -1;
  bool pendingUnk = false;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    i += utf8Length(static_cast<unsigned char>(word[i]));
    if (i > word.size())
      i = word.size();
    int32_t id = characterId(word, start, i, scratch.piece);
    if (id >= 0) {
      if (pendingUnk) {
        add(unkId);
        pendingUnk = false;
      }
      add(id);
      continue;
    }
    if (byteFallback) {
      // The bytes of the character with its prefix and suffix.
      std::string piece;
      if (start != 0 && prefix)
        piece += *prefix;
      piece.append(word.substr(start, i - start));
      if (i == word.size() && suffix)
        piece += *suffix;
      bool all = true;
      for (char c : piece)
        all &= byteIds[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // tokenizers adds the bytes before a pending unk.
        for (char c : piece)
          add(byteIds[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unkToken) {
      if (unkId < 0)
        continue; // tokenizers fails the whole encode here
      if (pendingUnk && !fuseUnk)
        add(unkId);
      pendingUnk = true;
    }
  }
  if (pendingUnk)
    add(unkId);

  if (ids.size() <= kShortWord) {
    mergeShortWord(ids.data(), ids.size(), out);
    return;
  }
  std::vector<Symbol> &symbols = scratch.symbols;
  symbols.clear();
  for (size_t k = 0; k < ids.size(); ++k)
    symbols.push_back({ids[k], int32_t(k) - 1,
                       k + 1 < ids.size() ? int32_t(k + 1) : -1, true});
  std::vector<PendingMerge> &heap = scratch.heap;
  heap.clear();
  auto push = [&](int32_t pos, const MergeRule *m) {
    heap.emplace_back(m->rank, pos, m->newId);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t k = 0; k + 1 < symbols.size(); ++k)
    if (const MergeRule *m = merges.find(symbols[k].id, symbols[k + 1].id))
      heap.emplace_back(m->rank, int32_t(k), m->newId);
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    PendingMerge top = heap.back();
    heap.pop_back();
    int32_t pos = top.pos();
    Symbol &left = symbols[size_t(pos)];
    if (!left.alive || left.next < 0)
      continue;
    Symbol &right = symbols[size_t(left.next)];
    const MergeRule *m = merges.find(left.id, right.id);
    if (!m || m->newId != top.newId)
      continue;
    left.id = top.newId;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0)
      symbols[size_t(right.next)].prev = pos;
    if (left.prev >= 0)
      if (const MergeRule *pm =
              merges.find(symbols[size_t(left.prev)].id, left.id))
        push(left.prev, pm);
    if (left.next >= 0)
      if (const MergeRule *nm =
              merges.find(left.id, symbols[size_t(left.next)].id))
        push(pos, nm);
  }
  for (const Symbol &s : symbols)
    if (s.alive)
      out.push_back(s.id);
}

//===----------------------------------------------------------------------===//
// WordPiece
//===----------------------------------------------------------------------===//

class WordPieceModel : public VocabularyModel {
public:
  Status parse(const JsonReader &reader, const json &node,
               const std::string &path) {
    const json *vocabNode = JsonReader::find(node, "vocab");
    if (!vocabNode)
      return reader.fail(JsonReader::join(path, "vocab"), "missing");
    if (Status s =
            vocab.parse(reader, *vocabNode, JsonReader::join(path, "vocab"));
        !s)
      return s;
    Expected<std::string> unk =
        reader.optString(node, path, "unk_token", "[UNK]");
    Expected<std::string> pre =
        reader.optString(node, path, "continuing_subword_prefix", "##");
    Expected<int64_t> maxChars =
        reader.integer(node, path, "max_input_chars_per_word", 100);
    if (!unk)
      return unk.takeError();
    if (!pre)
      return pre.takeError();
    if (!maxChars)
      return maxChars.takeError();
    unkToken = *unk;
    prefix = *pre;
    maxInputChars = *maxChars;
    unkId = vocab.find(unkToken);
    // The tokens after the first of a word are looked up without building
    // prefix + piece: by the rest of each token that has the prefix.
    continuing.reserve(vocab.size());
    for (const std::string &token : vocab.tokens())
      if (token.compare(0, prefix.size(), prefix) == 0)
        continuing.insert(std::string_view(token).substr(prefix.size()),
                          vocab.find(token));
    return Status();
  }


protected:
  /// Greedy longest-match-first (WordPiece::tokenize).
  void tokenizeUncached(std::string_view word,
                        std::vector<int64_t> &out) const override {
    size_t chars = 0;
    for (char c : word)
      chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (int64_t(chars) > maxInputChars) {
      if (unkId >= 0)
        out.push_back(unkId);
      return;
    }
    size_t mark = out.size();
    for (size_t start = 0; start < word.size();) {
      const StringIdMap &map = start > 0 ? continuing : vocab.ids();
      // No token is longer than the longest key: start there, on a
      // character boundary.
      size_t end = std::min(word.size(), start + map.longest());
      while (end > start && end < word.size() &&
             (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80)
        --end;
      int32_t found = -1;
      while (start < end) {
        found = map.find(word.substr(start, end - start));
        if (found >= 0)
          break;
        // Back off one character.
        do
          --end;
        while (end > start &&
               (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (found < 0) {
        out.resize(mark);
        if (unkId >= 0)
          out.push_back(unkId);
        return;
      }
      out.push_back(found);
      start = end;
    }
  }

private:
  /// The tokens that start with the prefix, by what follows it.
  StringIdMap continuing;
  std::string unkToken, prefix;
  int64_t maxInputChars = 100;
  int32_t unkId = -1;
};

} // namespace

Expected<std::unique_ptr<Model>> tok::parseModel(const JsonReader &reader,
                                                 const json &node,
                                                 const std::string &path) {
  if (!node.is_object())
    return reader.fail(path, std::string("expected an object, got ") +
                                 node.type_name());
  // Old files leave out "type": tell the models apart by their fields, as
  // tokenizers' untagged deserialization does.
  std::string type;
  if (JsonReader::has(node, "type")) {
    Expected<std::string> t = reader.string(node, path, "type");
    if (!t)
      return t.takeError();
    type = *t;
  } else if (JsonReader::has(node, "merges")) {
    type = "BPE";
  } else if (JsonReader::has(node, "max_input_chars_per_word")) {
    type = "WordPiece";
  } else {
    const json *vocab = JsonReader::find(node, "vocab");
    type = vocab && vocab->is_array() ? "Unigram" : "WordLevel";
  }
  if (type == "BPE") {
    auto bpe = std::make_unique<BpeModel>();
    if (Status s = bpe->parse(reader, node, path); !s)
      return s.takeError();
    bpe->enableCache();
    return std::unique_ptr<Model>(std::move(bpe));
  }
  if (type == "WordPiece") {
    auto wp = std::make_unique<WordPieceModel>();
    if (Status s = wp->parse(reader, node, path); !s)
      return s.takeError();
    wp->enableCache();
    return std::unique_ptr<Model>(std::move(wp));
  }
  return reader.unsupported(JsonReader::join(path, "type"), type);
}
