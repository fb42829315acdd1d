//===- Tokenizer.cpp - Hugging Face tokenizer.json ------------------------===//
//
// Part of xfmr.
//
// Loading, the added vocabulary, encode, decode and DecodeStream. Encoding
// runs the steps of tokenizers' TokenizerImpl::encode_single_sequence:
//
//   1. split the input on the added tokens that are not normalized
//      (leftmost-longest, then single_word/lstrip/rstrip as
//      added_vocabulary.rs);
//   2. normalize each remaining segment and split it on the normalized
//      added tokens;
//   3. pre-tokenize the rest into words and run the model on each word;
//   4. with special tokens, the post-processor.
//
// The components live in TokenizerNormalizers.cpp,
// TokenizerPreTokenizers.cpp, TokenizerModels.cpp and TokenizerDecoders.cpp.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Tokenizer.h"
#include "xfmr/runtime/JsonSyntax.h"

#include "TokenizerInternal.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

Tokenizer::~Tokenizer() = default;

bool Tokenizer::dependsOnNext(int64_t) const { return false; }

bool Tokenizer::isSkipped(int64_t id, bool skipSpecialTokens) const {
  return idToToken(id).empty() || (skipSpecialTokens && isSpecial(id));
}

//===----------------------------------------------------------------------===//
// JsonReader
//===----------------------------------------------------------------------===//

const json *JsonReader::find(const json &obj, const char *key) {
  if (!obj.is_object())
    return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool JsonReader::has(const json &obj, const char *key) {
  const json *v = find(obj, key);
  return v && !v->is_null();
}

Expected<std::string> JsonReader::type(const json &obj,
                                       const std::string &path) const {
  if (!obj.is_object())
    return fail(path,
                std::string("expected an object, got ") + obj.type_name());
  return string(obj, path, "type");
}

Expected<std::string> JsonReader::string(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  const json *v = find(obj, key);
  if (!v)
    return fail(join(path, key), "missing");
  if (!v->is_string())
    return fail(join(path, key),
                std::string("expected a string, got ") + v->type_name());
  return v->get_ref<const std::string &>();
}

Expected<std::string> JsonReader::optString(const json &obj,
                                            const std::string &path,
                                            const char *key,
                                            const std::string &fallback) const {
  if (!has(obj, key))
    return fallback;
  return string(obj, path, key);
}

Expected<bool> JsonReader::boolean(const json &obj, const std::string &path,
                                   const char *key, bool fallback) const {
  const json *v = find(obj, key);
  if (!v || v->is_null())
    return fallback;
  if (!v->is_boolean())
    return fail(join(path, key),
                std::string("expected a boolean, got ") + v->type_name());
  return v->get<bool>();
}

Expected<int64_t> JsonReader::asInteger(const json &v,
                                        const std::string &path) const {
  if (v.is_number_unsigned()) {
    auto u = v.get<json::number_unsigned_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      return fail(path, "integer too large");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer())
    return static_cast<int64_t>(v.get<json::number_integer_t>());
  return fail(path, std::string("expected an integer, got ") + v.type_name());
}

Expected<int64_t> JsonReader::integer(const json &obj, const std::string &path,
                                      const char *key, int64_t fallback) const {
  const json *v = find(obj, key);
  if (!v || v->is_null())
    return fallback;
  return asInteger(*v, join(path, key));
}

Expected<const json *> JsonReader::array(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  const json *v = find(obj, key);
  if (!v)
    return fail(join(path, key), "missing");
  if (!v->is_array())
    return fail(join(path, key),
                std::string("expected an array, got ") + v->type_name());
  return v;
}

Expected<char32_t> JsonReader::character(const json &obj,
                                         const std::string &path,
                                         const char *key) const {
  Expected<std::string> s = string(obj, path, key);
  if (!s)
    return s.takeError();
  size_t i = 0;
  if (s->empty() || (nextCodePoint(*s, i), i != s->size()))
    return fail(join(path, key), "expected one character");
  i = 0;
  return nextCodePoint(*s, i);
}

Status JsonReader::checkNesting(const std::string &path) const {
  constexpr size_t kMaxDepth = 16;
  if (size_t(std::count(path.begin(), path.end(), '[')) >= kMaxDepth)
    return fail(path, "Sequence nested more than " + std::to_string(kMaxDepth) +
                          " deep");
  return Status();
}

Expected<Regex> JsonReader::pattern(const json &obj, const std::string &path,
                                    const char *key) const {
  std::string p = join(path, key);
  const json *v = find(obj, key);
  if (!v)
    return fail(p, "missing");
  if (!v->is_object() || v->size() != 1)
    return fail(p, "expected {\"String\": ...} or {\"Regex\": ...}");
  bool isString = has(*v, "String");
  Expected<std::string> text = string(*v, p, isString ? "String" : "Regex");
  if (!text)
    return text.takeError();
  Expected<Regex> re = isString ? Regex::literal(*text) : Regex::compile(*text);
  if (!re)
    return fail(p, re.error());
  return re;
}

namespace {

//===----------------------------------------------------------------------===//
// Added vocabulary
//===----------------------------------------------------------------------===//

struct AddedToken {
  std::string content;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = true,
       special = false;

  bool operator==(const AddedToken &o) const {
    return content == o.content && singleWord == o.singleWord &&
           lstrip == o.lstrip && rstrip == o.rstrip &&
           normalized == o.normalized && special == o.special;
  }
};

/// A part of the input: an added token (id >= 0) or text to tokenize.
struct Segment {
  size_t start, end;
  int64_t id;
};

/// Finds added tokens in text, leftmost-longest and non-overlapping (the
/// daachorse automaton of added_vocabulary.rs), with a byte trie.
class TokenMatcher {
public:
  void add(std::string_view pattern, int64_t id) {
    if (pattern.empty())
      return;
    if (terminal.empty())
      terminal.push_back(-1);
    int32_t node = 0;
    for (char c : pattern) {
      uint64_t key = edgeKey(node, c);
      auto it = edges.find(key);
      if (it == edges.end()) {
        int32_t child = int32_t(terminal.size());
        terminal.push_back(-1);
        edges.emplace(key, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    terminal[size_t(node)] = id;
    auto first = static_cast<unsigned char>(pattern[0]);
    distinctFirstBytes += !firstBytes[first];
    firstBytes[first] = true;
    onlyFirstByte = distinctFirstBytes == 1 ? first : -1;
  }
  bool empty() const { return terminal.empty(); }

  /// The longest match starting at the leftmost possible position >= from:
  /// (start, end, id), or id -1.
  Segment next(std::string_view text, size_t from) const {
    for (size_t i = from; i < text.size(); ++i) {
      if (onlyFirstByte >= 0) {
        const void *hit =
            std::memchr(text.data() + i, onlyFirstByte, text.size() - i);
        if (!hit)
          break;
        i = size_t(static_cast<const char *>(hit) - text.data());
      } else if (!firstBytes[static_cast<unsigned char>(text[i])]) {
        continue;
      }
      int32_t node = 0;
      size_t bestEnd = 0;
      int64_t bestId = -1;
      for (size_t j = i; j < text.size(); ++j) {
        auto it = edges.find(edgeKey(node, text[j]));
        if (it == edges.end())
          break;
        node = it->second;
        if (terminal[size_t(node)] >= 0) {
          bestEnd = j + 1;
          bestId = terminal[size_t(node)];
        }
      }
      if (bestId >= 0)
        return {i, bestEnd, bestId};
    }
    return {text.size(), text.size(), -1};
  }

private:
  static uint64_t edgeKey(int32_t node, char c) {
    return (uint64_t(uint32_t(node)) << 8) | static_cast<unsigned char>(c);
  }
  std::unordered_map<uint64_t, int32_t> edges;
  std::vector<int64_t> terminal;
  bool firstBytes[256] = {};
  /// The first byte of every token when they share one (the special
  /// tokens of most files start with '<'), found by memchr; else -1.
  int onlyFirstByte = -1;
  size_t distinctFirstBytes = 0;
};

/// The character before byte `pos` of valid UTF-8 text.
char32_t charBefore(std::string_view text, size_t pos) {
  size_t i = pos - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80)
    --i;
  return nextCodePoint(text, i);
}

/// tokenizers' AddedVocabulary.
class AddedVocabulary {
public:
  /// add_tokens: ids come from the vocabulary or follow it.
  void add(std::vector<AddedToken> tokens, const Model &model,
           const Normalizer *normalizer) {
    int64_t nextId = int64_t(model.size());
    for (AddedToken &token : tokens) {
      if (token.content.empty())
        continue;
      auto known = byContent.find(token.content);
      if (known != byContent.end()) {
        auto it = byId.find(known->second);
        if (it != byId.end() && it->second == token)
          continue;
      }
      int64_t id;
      if (known != byContent.end())
        id = known->second;
      else if (auto modelId = model.tokenToId(token.content))
        id = *modelId;
      else
        id = nextId++;
      normalizedForm.erase(id);
      if (token.normalized && normalizer) {
        std::string norm = token.content;
        normalizer->normalize(norm);
        if (norm != token.content)
          normalizedForm[id] = norm;
      }
      byContent[token.content] = id;
      if (token.special)
        specialContents.insert(token.content);
      byId[id] = std::move(token);
    }
    for (const auto &[id, token] : byId) {
      if (token.normalized) {
        auto it = normalizedForm.find(id);
        normalizedMatcher.add(
            it == normalizedForm.end() ? token.content : it->second, id);
      } else {
        plainMatcher.add(token.content, id);
      }
    }
  }

  /// find_matches: `text` cut at the added tokens of `matcher`.
  void split(std::string_view text, bool normalizedTokens,
             std::vector<Segment> &out) const {
    out.clear();
    const TokenMatcher &matcher =
        normalizedTokens ? normalizedMatcher : plainMatcher;
    if (matcher.empty()) {
      out.push_back({0, text.size(), -1});
      return;
    }
    size_t startOffset = 0;
    for (size_t from = 0; from < text.size();) {
      Segment m = matcher.next(text, from);
      if (m.id < 0)
        break;
      from = m.end;
      const AddedToken &token = byId.at(m.id);
      size_t start = m.start, stop = m.end;
      if (token.singleWord) {
        bool startSpace =
            start == 0 || !isRustWordChar(charBefore(text, start));
        size_t after = stop;
        bool stopSpace =
            stop == text.size() || !isRustWordChar(nextCodePoint(text, after));
        if (!startSpace || !stopSpace)
          continue;
      }
      if (token.lstrip) {
        size_t s = start;
        while (s > 0) {
          size_t prev = s - 1;
          while (prev > 0 &&
                 (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80)
            --prev;
          size_t probe = prev;
          if (!isRustWhitespace(nextCodePoint(text, probe)))
            break;
          s = prev;
        }
        start = std::max(s, startOffset);
      }
      if (token.rstrip) {
        while (stop < text.size()) {
          size_t probe = stop;
          if (!isRustWhitespace(nextCodePoint(text, probe)))
            break;
          stop = probe;
        }
      }
      if (startOffset < start)
        out.push_back({startOffset, start, -1});
      out.push_back({start, stop, m.id});
      startOffset = stop;
      from = std::max(from, stop);
    }
    if (startOffset != text.size() || out.empty())
      out.push_back({startOffset, text.size(), -1});
  }

  /// simple_id_to_token: the normalized form of a normalized token.
  const std::string *token(int64_t id) const {
    auto n = normalizedForm.find(id);
    if (n != normalizedForm.end())
      return &n->second;
    auto it = byId.find(id);
    return it == byId.end() ? nullptr : &it->second.content;
  }
  std::optional<int64_t> find(std::string_view content) const {
    auto it = byContent.find(std::string(content));
    return it == byContent.end() ? std::nullopt
                                 : std::optional<int64_t>(it->second);
  }
  bool isSpecialContent(const std::string &s) const {
    return specialContents.count(s) != 0;
  }
  bool isSpecialId(int64_t id) const {
    auto it = byId.find(id);
    return it != byId.end() && it->second.special;
  }
  int64_t idLimit() const {
    return byId.empty() ? 0 : byId.rbegin()->first + 1;
  }

private:
  std::unordered_map<std::string, int64_t> byContent;
  std::map<int64_t, AddedToken> byId;
  std::unordered_map<int64_t, std::string> normalizedForm;
  std::unordered_set<std::string> specialContents;
  TokenMatcher plainMatcher, normalizedMatcher;
};

//===----------------------------------------------------------------------===//
// The tokenizer
//===----------------------------------------------------------------------===//

class JsonTokenizer : public Tokenizer {
public:
  Status load(const JsonReader &reader, const json &root);

  std::vector<int64_t> encode(std::string_view text,
                              bool addSpecialTokens) const override;
  std::string decode(const std::vector<int64_t> &ids,
                     bool skipSpecialTokens) const override;
  std::optional<int64_t> tokenToId(std::string_view token) const override {
    if (auto id = added.find(token))
      return id;
    return model->tokenToId(token);
  }
  std::string idToToken(int64_t id) const override {
    const std::string *t = tokenString(id);
    return t ? *t : std::string();
  }
  int64_t vocabSize() const override {
    return std::max(model->idLimit(), added.idLimit());
  }
  bool isSpecial(int64_t id) const override { return added.isSpecialId(id); }

private:
  bool dependsOnNext(int64_t id) const override {
    const std::string *t = tokenString(id);
    return t && decoder && decoder->dependsOnNext(*t);
  }
  bool isSkipped(int64_t id, bool skipSpecialTokens) const override {
    const std::string *t = tokenString(id);
    return !t || (skipSpecialTokens && added.isSpecialContent(*t));
  }
  const std::string *tokenString(int64_t id) const {
    if (const std::string *t = added.token(id))
      return t;
    return model->idToToken(id);
  }
  /// Steps 2 and 3 for one segment between non-normalized added tokens.
  void encodeSegment(std::string text, bool atStart,
                     std::vector<int64_t> &ids) const;

  std::unique_ptr<Model> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<PostProcessor> postProcessor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
};

Expected<std::vector<AddedToken>> parseAddedTokens(const JsonReader &reader,
                                                   const json &root) {
  std::vector<AddedToken> tokens;
  const json *list = JsonReader::find(root, "added_tokens");
  if (!list || list->is_null())
    return tokens;
  if (!list->is_array())
    return reader.fail("added_tokens", "expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json &node = (*list)[i];
    std::string path = JsonReader::index("added_tokens", i);
    if (!node.is_object())
      return reader.fail(path, "expected an object");
    AddedToken t;
    Expected<std::string> content = reader.string(node, path, "content");
    if (!content)
      return content.takeError();
    t.content = content.take();
    Expected<bool> special = reader.boolean(node, path, "special", false);
    if (!special)
      return special.takeError();
    t.special = *special;
    for (auto [key, dst, fallback] :
         {std::tuple{"single_word", &t.singleWord, false},
          std::tuple{"lstrip", &t.lstrip, false},
          std::tuple{"rstrip", &t.rstrip, false},
          std::tuple{"normalized", &t.normalized, !t.special}}) {
      Expected<bool> v = reader.boolean(node, path, key, fallback);
      if (!v)
        return v.takeError();
      *dst = *v;
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

Status JsonTokenizer::load(const JsonReader &reader, const json &root) {
  if (!root.is_object())
    return reader.fail("(root)", std::string("expected an object, got ") +
                                     root.type_name());
  const json *modelNode = JsonReader::find(root, "model");
  if (!modelNode)
    return reader.fail("model", "missing");
  Expected<std::unique_ptr<Model>> m = parseModel(reader, *modelNode, "model");
  if (!m)
    return m.takeError();
  model = m.take();
  if (JsonReader::has(root, "normalizer")) {
    auto n = parseNormalizer(reader, root["normalizer"], "normalizer");
    if (!n)
      return n.takeError();
    normalizer = n.take();
  }
  if (JsonReader::has(root, "pre_tokenizer")) {
    auto p = parsePreTokenizer(reader, root["pre_tokenizer"], "pre_tokenizer");
    if (!p)
      return p.takeError();
    preTokenizer = p.take();
  }
  if (JsonReader::has(root, "post_processor")) {
    auto p =
        parsePostProcessor(reader, root["post_processor"], "post_processor");
    if (!p)
      return p.takeError();
    postProcessor = p.take();
  }
  if (JsonReader::has(root, "decoder")) {
    auto d = parseDecoder(reader, root["decoder"], "decoder");
    if (!d)
      return d.takeError();
    decoder = d.take();
  }
  Expected<std::vector<AddedToken>> tokens = parseAddedTokens(reader, root);
  if (!tokens)
    return tokens.takeError();
  added.add(tokens.take(), *model, normalizer.get());
  return Status();
}

void JsonTokenizer::encodeSegment(std::string text, bool atStart,
                                  std::vector<int64_t> &ids) const {
  if (normalizer) {
    bool keepsStart = true;
    normalizer->normalize(text, keepsStart);
    atStart = atStart && keepsStart;
  }
  // Per thread rather than per call: with the vectors of encode() and of
  // the pre-tokenizer, their allocations were 8% of a first pass.
  thread_local std::vector<Segment> segments;
  thread_local std::vector<Piece> pieces;
  added.split(text, /*normalizedTokens=*/true, segments);
  for (const Segment &s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    if (s.start == s.end)
      continue;
    pieces.clear();
    if (segments.size() == 1)
      pieces.push_back({std::move(text), atStart}); // all of it
    else
      pieces.push_back(
          {text.substr(s.start, s.end - s.start), atStart && s.start == 0});
    if (preTokenizer)
      preTokenizer->preTokenize(pieces);
    model->tokenizeAll(pieces, ids);
  }
  releaseScratch(pieces);
  releaseScratch(segments);
}

std::vector<int64_t> JsonTokenizer::encode(std::string_view text,
                                           bool addSpecialTokens) const {
  std::string valid;
  if (!isValidUtf8(text)) {
    valid = toValidUtf8(text);
    text = valid;
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 4 + 4); // a token is 3 to 5 bytes of most text
  thread_local std::vector<Segment> segments; // see encodeSegment
  added.split(text, /*normalizedTokens=*/false, segments);
  for (const Segment &s : segments) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      encodeSegment(std::string(text.substr(s.start, s.end - s.start)),
                    s.start == 0, ids);
  }
  releaseScratch(segments);
  if (addSpecialTokens && postProcessor)
    postProcessor->process(ids);
  return ids;
}

std::string JsonTokenizer::decode(const std::vector<int64_t> &ids,
                                  bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string *t = tokenString(id);
    if (!t || (skipSpecialTokens && added.isSpecialContent(*t)))
      continue;
    tokens.push_back(*t);
  }
  std::string text;
  if (!decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i)
        text += ' ';
      text += tokens[i];
    }
    return text;
  }
  if (tokens.empty())
    return text;
  decoder->decodeChain(tokens);
  for (const std::string &t : tokens)
    text += t;
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<Tokenizer>>
Tokenizer::fromJson(std::string_view text, const std::string &name) {
  json root = json::parse(text.begin(), text.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Error(name + ": invalid JSON: " + jsonSyntaxError(text));
  }
  JsonReader reader(name);
  auto tokenizer = std::make_unique<JsonTokenizer>();
  if (Status s = tokenizer->load(reader, root); !s)
    return s.takeError();
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

Expected<std::unique_ptr<Tokenizer>>
Tokenizer::fromFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  // The largest real tokenizer.json files are tens of MB.
  if (size < 0 || size > (std::streamoff(1) << 30))
    return Error(path + ": not a readable file of at most 1 GiB");
  in.seekg(0);
  std::string text(size_t(size), '\0');
  if (!in.read(text.data(), size))
    return Error(path + ": read failed");
  return fromJson(text, path);
}

//===----------------------------------------------------------------------===//
// DecodeStream
//===----------------------------------------------------------------------===//

DecodeStream::DecodeStream(const Tokenizer &tokenizer, bool skipSpecialTokens,
                           std::vector<int64_t> prompt)
    : tokenizer(tokenizer), skipSpecial(skipSpecialTokens),
      ids(std::move(prompt)) {
  readOffset = ids.size();
  if (ids.empty())
    return;
  // Start the window a few tokens back in the prompt, at a token whose
  // window decodes to the same text as the end of the whole prompt.
  std::string full = decodeRange(0, ids.size());
  size_t lowest = ids.size() > 8 ? ids.size() - 8 : 1;
  for (size_t p = ids.size() - 1; p >= lowest; --p) {
    if (!startsWindow(p) || tokenizer.dependsOnNext(ids[p - 1]))
      continue;
    std::string tail = decodeRange(p, ids.size());
    if (full.size() >= tail.size() &&
        full.compare(full.size() - tail.size(), tail.size(), tail) == 0 &&
        !endsWithReplacementChar(decodeRange(0, p))) {
      prefixOffset = p;
      return;
    }
  }
}

std::string DecodeStream::decodeRange(size_t begin, size_t end) const {
  return tokenizer.decode(
      std::vector<int64_t>(ids.begin() + long(begin), ids.begin() + long(end)),
      skipSpecial);
}

bool DecodeStream::startsWindow(size_t pos) const {
  return !tokenizer.isSkipped(ids[pos], skipSpecial) &&
         !decodeRange(pos, pos + 1).empty();
}

std::string DecodeStream::step(int64_t id) {
  ids.push_back(id);
  // A dropped token adds nothing; a byte of a ByteFallback run waits for
  // the end of the run.
  if (tokenizer.isSkipped(id, skipSpecial) || tokenizer.dependsOnNext(id))
    return std::string();
  std::string prefixText = decodeRange(prefixOffset, readOffset);
  std::string text = decodeRange(prefixOffset, ids.size());
  // Hold back an incomplete character (decoded as a trailing U+FFFD).
  if (text.size() <= prefixText.size() || endsWithReplacementChar(text) ||
      text.compare(0, prefixText.size(), prefixText) != 0)
    return std::string();
  std::string piece = text.substr(prefixText.size());
  if (startsWindow(readOffset))
    prefixOffset = readOffset;
  readOffset = ids.size();
  return piece;
}

std::string DecodeStream::flush() {
  std::string prefixText = decodeRange(prefixOffset, readOffset);
  std::string text = decodeRange(prefixOffset, ids.size());
  readOffset = ids.size();
  if (text.size() <= prefixText.size() ||
      text.compare(0, prefixText.size(), prefixText) != 0)
    return std::string();
  return text.substr(prefixText.size());
}
