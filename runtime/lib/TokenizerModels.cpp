//===- TokenizerModels.cpp - BPE and WordPiece ----------------------------===//
//
// Part of xfmr.
//
// The models of tokenizer.json (tokenizers/src/models/{bpe,wordpiece}).
//
// BPE merges a word with a priority queue over adjacent pairs (lowest merge
// rank first, then leftmost), pairs looked up by their two ids in a hash
// map: O(n log n) in the word length, the same result as tokenizers'
// Word::merge_all. Words repeat, so merged words are kept in a cache shared
// by all threads: 64 shards, each a mutex and a bounded hash map (a shard
// that fills up starts over), so that concurrent encodes rarely wait on
// each other.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

#include <array>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>

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
  uint64_t v = 0;
  std::memcpy(&v, s.data() + i, s.size() - i);
  h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

/// Strings (owned elsewhere, never moved) to ids: open addressing with the
/// hash kept in the slot, so that a probe compares strings only on a likely
/// hit. std::unordered_map's node per entry and byte-at-a-time hash were
/// most of WordPiece's time, which looks up every prefix of a word.
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
  }
  int32_t find(std::string_view key) const {
    if (slots.empty() || key.size() > maxLength)
      return -1;
    uint64_t hash = hashWord(key);
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
  std::vector<Slot> slots;
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

/// Merged words by their text, shared by the threads that encode: each
/// shard an open-addressing table of 128-byte slots under its own mutex,
/// emptied when half full. A slot holds its word and ids inline, so that a
/// hit reads two adjacent cache lines; the rare words that do not fit are
/// merged every time.
class WordCache {
public:
  static constexpr size_t kMaxWordBytes = 256;

  bool lookup(std::string_view word, uint64_t hash,
              std::vector<int64_t> &out) const {
    Shard &shard = shards[hash >> (64 - kShardBits)];
    std::lock_guard<std::mutex> lock(shard.mutex);
    if (shard.slots.empty())
      return false;
    for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot &slot = shard.slots[i];
      if (!slot.hash)
        return false;
      if (slot.hash != hash || slot.wordLen != word.size() ||
          std::memcmp(slot.data, word.data(), word.size()) != 0)
        continue;
      const char *ids = slot.data + slot.wordLen;
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
    if (word.size() + 4 * n > sizeof(Slot::data))
      return;
    Shard &shard = shards[hash >> (64 - kShardBits)];
    std::lock_guard<std::mutex> lock(shard.mutex);
    if (shard.slots.empty())
      shard.slots.resize(kSlots);
    if (shard.used >= kSlots / 2) {
      for (Slot &slot : shard.slots)
        slot.hash = 0;
      shard.used = 0;
    }
    size_t i = hash & (kSlots - 1);
    while (shard.slots[i].hash)
      i = (i + 1) & (kSlots - 1);
    Slot &slot = shard.slots[i];
    slot.hash = hash;
    slot.wordLen = static_cast<uint8_t>(word.size());
    slot.idCount = static_cast<uint8_t>(n);
    std::memcpy(slot.data, word.data(), word.size());
    for (size_t k = 0; k < n; ++k) {
      int32_t id = static_cast<int32_t>(ids[k]);
      std::memcpy(slot.data + word.size() + 4 * k, &id, 4);
    }
    ++shard.used;
  }

  /// The hash lookup and insert take; never 0 (an empty slot).
  static uint64_t hash(std::string_view word) { return hashWord(word) | 1; }

private:
  static constexpr unsigned kShardBits = 6;
  static constexpr size_t kSlots = 2048;
  /// The word's bytes, then its ids as int32.
  struct alignas(64) Slot {
    uint64_t hash = 0;
    uint8_t wordLen = 0, idCount = 0;
    char data[118];
  };
  static_assert(sizeof(Slot) == 128, "two cache lines per slot");
  struct Shard {
    std::mutex mutex;
    std::vector<Slot> slots;
    size_t used = 0;
  };
  mutable std::array<Shard, size_t(1) << kShardBits> shards;
};

//===----------------------------------------------------------------------===//
// BPE
//===----------------------------------------------------------------------===//

class BpeModel : public Model {
public:
  Status parse(const JsonReader &reader, const json &node,
               const std::string &path);

  void tokenize(std::string_view word,
                std::vector<int64_t> &out) const override;
  std::optional<int64_t> tokenToId(std::string_view token) const override {
    int32_t id = vocab.find(token);
    return id < 0 ? std::nullopt : std::optional<int64_t>(id);
  }
  const std::string *idToToken(int64_t id) const override {
    return vocab.token(id);
  }
  size_t size() const override { return vocab.size(); }
  int64_t idLimit() const override { return vocab.idLimit(); }

private:
  /// merge_word of tokenizers/src/models/bpe/model.rs.
  void mergeWord(std::string_view word, std::vector<int64_t> &out) const;
  static uint64_t pairKey(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }

  Vocabulary vocab;
  /// (left id, right id) -> (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::optional<std::string> unkToken, prefix, suffix;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  std::array<int32_t, 256> byteIds{};
  WordCache cache;
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
    merges[pairKey(aId, bId)] = {rank++, newId};
  }
  return Status();
}

void BpeModel::tokenize(std::string_view word,
                        std::vector<int64_t> &out) const {
  if (ignoreMerges) {
    int32_t id = vocab.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() >= WordCache::kMaxWordBytes) {
    mergeWord(word, out);
    return;
  }
  uint64_t hash = WordCache::hash(word);
  if (cache.lookup(word, hash, out))
    return;
  size_t mark = out.size();
  mergeWord(word, out);
  cache.insert(word, hash, out.data() + mark, out.size() - mark);
}

void BpeModel::mergeWord(std::string_view word,
                         std::vector<int64_t> &out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t index = int32_t(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
    if (index > 0)
      symbols[size_t(index - 1)].next = index;
  };

  // The initial symbols: one per character, unknown ones as bytes or unk.
  int32_t unkId = unkToken ? vocab.find(*unkToken) : -1;
  bool pendingUnk = false;
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    i += utf8Length(static_cast<unsigned char>(word[i]));
    if (i > word.size())
      i = word.size();
    piece.clear();
    if (start != 0 && prefix)
      piece += *prefix;
    piece.append(word.substr(start, i - start));
    if (i == word.size() && suffix)
      piece += *suffix;
    int32_t id = vocab.find(piece);
    if (id >= 0) {
      if (pendingUnk) {
        add(unkId);
        pendingUnk = false;
      }
      add(id);
      continue;
    }
    if (byteFallback) {
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

  struct Merge {
    int32_t rank, pos, newId;
    bool operator<(const Merge &o) const {
      // priority_queue pops the largest: invert for lowest rank, then
      // leftmost position.
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Merge> queue;
  auto pairOf = [&](int32_t a,
                    int32_t b) -> const std::pair<int32_t, int32_t> * {
    auto it = merges.find(pairKey(a, b));
    return it == merges.end() ? nullptr : &it->second;
  };
  for (size_t k = 0; k + 1 < symbols.size(); ++k)
    if (auto *m = pairOf(symbols[k].id, symbols[k + 1].id))
      queue.push({m->first, int32_t(k), m->second});
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &left = symbols[size_t(top.pos)];
    if (!left.alive || left.next < 0)
      continue;
    Symbol &right = symbols[size_t(left.next)];
    auto *m = pairOf(left.id, right.id);
    if (!m || m->second != top.newId)
      continue;
    left.id = top.newId;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0)
      symbols[size_t(right.next)].prev = top.pos;
    if (left.prev >= 0)
      if (auto *pm = pairOf(symbols[size_t(left.prev)].id, left.id))
        queue.push({pm->first, left.prev, pm->second});
    if (left.next >= 0)
      if (auto *nm = pairOf(left.id, symbols[size_t(left.next)].id))
        queue.push({nm->first, top.pos, nm->second});
  }
  for (const Symbol &s : symbols)
    if (s.alive)
      out.push_back(s.id);
}

//===----------------------------------------------------------------------===//
// WordPiece
//===----------------------------------------------------------------------===//

class WordPieceModel : public Model {
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

  /// Greedy longest-match-first (WordPiece::tokenize).
  void tokenize(std::string_view word,
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
  std::optional<int64_t> tokenToId(std::string_view token) const override {
    int32_t id = vocab.find(token);
    return id < 0 ? std::nullopt : std::optional<int64_t>(id);
  }
  const std::string *idToToken(int64_t id) const override {
    return vocab.token(id);
  }
  size_t size() const override { return vocab.size(); }
  int64_t idLimit() const override { return vocab.idLimit(); }

private:
  Vocabulary vocab;
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
    return std::unique_ptr<Model>(std::move(bpe));
  }
  if (type == "WordPiece") {
    auto wp = std::make_unique<WordPieceModel>();
    if (Status s = wp->parse(reader, node, path); !s)
      return s.takeError();
    return std::unique_ptr<Model>(std::move(wp));
  }
  return reader.unsupported(JsonReader::join(path, "type"), type);
}
