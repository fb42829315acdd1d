//===- TokenizerDecoders.cpp - decoders and post-processors ---------------===//
//
// Part of xfmr.
//
// The decoders of tokenizers/src/decoders, which turn token strings back
// into text, and the post-processors of tokenizers/src/processors, which add
// special tokens around an encoded sequence.
//
//===----------------------------------------------------------------------===//

#include "TokenizerInternal.h"

using namespace xfmr::rt;
using namespace xfmr::rt::tok;

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

namespace {

class SequenceDecoder : public Decoder {
public:
  std::vector<std::unique_ptr<Decoder>> decoders;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &d : decoders)
      d->decodeChain(tokens);
  }
  bool dependsOnNext(std::string_view token) const override {
    for (const auto &d : decoders)
      if (d->dependsOnNext(token))
        return true;
    return false;
  }
};

/// ByteLevel: the bytes of all tokens, decoded as UTF-8 with replacement.
class ByteLevelDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &t : tokens) {
      size_t mark = bytes.size();
      bool allBytes = true;
      for (size_t i = 0; i < t.size();) {
        int b = byteLevelByte(nextCodePoint(t, i));
        if (b < 0) {
          allBytes = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!allBytes) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, toValidUtf8(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
public:
  char32_t replacement = 0x2581;
  PrependScheme scheme = PrependScheme::Always;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string &t = tokens[k];
      std::string out;
      out.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        char32_t c = nextCodePoint(t, i);
        if (c != replacement)
          appendUtf8(out, c);
        else if (k != 0 || scheme == PrependScheme::Never)
          out += ' ';
      }
      tokens[k] = std::move(out);
    }
  }
};

/// The replacements of WordPiece's cleanup, applied in order.
std::string wordPieceCleanup(std::string s) {
  static const std::pair<const char *, const char *> rules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : rules) {
    std::string_view f(from);
    if (s.find(f) == std::string::npos)
      continue;
    std::string out;
    size_t prev = 0;
    for (size_t pos = s.find(f); pos != std::string::npos;
         pos = s.find(f, prev)) {
      out.append(s, prev, pos - prev);
      out += to;
      prev = pos + f.size();
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }
  return s;
}

class WordPieceDecoder : public Decoder {
public:
  std::string prefix = "##";
  bool cleanup = true;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string &t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix.size(), prefix) == 0)
          t.erase(0, prefix.size());
        else
          t.insert(0, 1, ' ');
      }
      if (cleanup)
        t = wordPieceCleanup(std::move(t));
    }
  }
};

/// The byte of a "<0xXX>" token, or -1.
int byteFallbackByte(std::string_view t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/// ByteFallback: runs of <0xXX> tokens become their UTF-8 text, or one
/// U+FFFD per byte when the run is not valid UTF-8.
class ByteFallbackDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t runTokens = 0;
    auto flushRun = [&] {
      if (!runTokens)
        return;
      if (isValidUtf8(run))
        out.push_back(run);
      else
        for (size_t i = 0; i < runTokens; ++i)
          out.emplace_back("\xEF\xBF\xBD");
      run.clear();
      runTokens = 0;
    };
    for (std::string &t : tokens) {
      int b = byteFallbackByte(t);
      if (b >= 0) {
        run += static_cast<char>(b);
        ++runTokens;
        continue;
      }
      flushRun();
      out.push_back(std::move(t));
    }
    flushRun();
    tokens = std::move(out);
  }
  bool dependsOnNext(std::string_view token) const override {
    return byteFallbackByte(token) >= 0;
  }
};

class FuseDecoder : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
};

/// Strip: up to `start` leading and `stop` trailing `content` characters of
/// every token.
class StripDecoder : public Decoder {
public:
  char32_t content = ' ';
  int64_t start = 0, stop = 0;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens) {
      std::vector<char32_t> chars;
      for (size_t i = 0; i < t.size();)
        chars.push_back(nextCodePoint(t, i));
      size_t startCut = 0;
      for (size_t i = 0; i < chars.size() && int64_t(i) < start; ++i) {
        if (chars[i] != content)
          break;
        startCut = i + 1;
      }
      size_t stopCut = chars.size();
      for (int64_t i = 0; i < stop && size_t(i) < chars.size(); ++i) {
        size_t index = chars.size() - i - 1;
        if (chars[index] != content)
          break;
        stopCut = index;
      }
      std::string out;
      for (size_t i = startCut; i < stopCut; ++i)
        appendUtf8(out, chars[i]);
      t = std::move(out);
    }
  }
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(Regex regex, std::string content)
      : regex(std::move(regex)), content(std::move(content)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens)
      t = replaceAll(regex, t, content);
  }

private:
  Regex regex;
  std::string content;
};

/// BPEDecoder: the end-of-word suffix becomes a space, except in the last
/// token.
class BpeDecoder : public Decoder {
public:
  std::string suffix = "</w>";
  void decodeChain(std::vector<std::string> &tokens) const override {
    if (suffix.empty())
      return;
    for (size_t k = 0; k < tokens.size(); ++k) {
      const char *replacement = k + 1 == tokens.size() ? "" : " ";
      std::string &t = tokens[k];
      std::string out;
      size_t prev = 0;
      for (size_t pos = t.find(suffix); pos != std::string::npos;
           pos = t.find(suffix, prev)) {
        out.append(t, prev, pos - prev);
        out += replacement;
        prev = pos + suffix.size();
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }
};

} // namespace

Expected<std::unique_ptr<Decoder>> tok::parseDecoder(const JsonReader &reader,
                                                     const json &node,
                                                     const std::string &path) {
  using Result = std::unique_ptr<Decoder>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    auto members =
        parseSequence<Decoder>(reader, node, path, "decoders", parseDecoder);
    if (!members)
      return members.takeError();
    auto seq = std::make_unique<SequenceDecoder>();
    seq->decoders = members.take();
    return std::unique_ptr<Decoder>(std::move(seq));
  }
  if (t == "ByteLevel")
    return Result(std::make_unique<ByteLevelDecoder>());
  if (t == "Metaspace") {
    auto ms = std::make_unique<MetaspaceDecoder>();
    Expected<char32_t> rep = reader.character(node, path, "replacement");
    if (!rep)
      return rep.takeError();
    Expected<PrependScheme> scheme = parsePrependScheme(reader, node, path);
    if (!scheme)
      return scheme.takeError();
    ms->replacement = *rep;
    ms->scheme = *scheme;
    return Result(std::move(ms));
  }
  if (t == "WordPiece") {
    auto wp = std::make_unique<WordPieceDecoder>();
    Expected<std::string> prefix = reader.optString(node, path, "prefix", "##");
    Expected<bool> cleanup = reader.boolean(node, path, "cleanup", true);
    if (!prefix)
      return prefix.takeError();
    if (!cleanup)
      return cleanup.takeError();
    wp->prefix = *prefix;
    wp->cleanup = *cleanup;
    return Result(std::move(wp));
  }
  if (t == "ByteFallback")
    return Result(std::make_unique<ByteFallbackDecoder>());
  if (t == "Fuse")
    return Result(std::make_unique<FuseDecoder>());
  if (t == "Strip") {
    auto strip = std::make_unique<StripDecoder>();
    Expected<char32_t> content = reader.character(node, path, "content");
    Expected<int64_t> start = reader.integer(node, path, "start", 0);
    Expected<int64_t> stop = reader.integer(node, path, "stop", 0);
    if (!content)
      return content.takeError();
    if (!start)
      return start.takeError();
    if (!stop)
      return stop.takeError();
    strip->content = *content;
    strip->start = *start;
    strip->stop = *stop;
    return Result(std::move(strip));
  }
  if (t == "Replace") {
    Expected<Regex> re = reader.pattern(node, path, "pattern");
    if (!re)
      return re.takeError();
    Expected<std::string> content = reader.string(node, path, "content");
    if (!content)
      return content.takeError();
    return Result(std::make_unique<ReplaceDecoder>(re.take(), content.take()));
  }
  if (t == "BPEDecoder") {
    auto bpe = std::make_unique<BpeDecoder>();
    Expected<std::string> suffix =
        reader.optString(node, path, "suffix", "</w>");
    if (!suffix)
      return suffix.takeError();
    bpe->suffix = *suffix;
    return Result(std::move(bpe));
  }
  return reader.unsupported(JsonReader::join(path, "type"), t);
}

//===----------------------------------------------------------------------===//
// Post-processors
//===----------------------------------------------------------------------===//

namespace {

class SequenceProcessor : public PostProcessor {
public:
  std::vector<std::unique_ptr<PostProcessor>> processors;
  void process(std::vector<int64_t> &ids) const override {
    for (const auto &p : processors)
      p->process(ids);
  }
};

/// ByteLevel and RobertaProcessing's offset trimming touch only offsets.
class NoopProcessor : public PostProcessor {
public:
  void process(std::vector<int64_t> &) const override {}
};

/// Ids before and after the sequence (BertProcessing, RobertaProcessing and
/// the single template of TemplateProcessing).
class WrapProcessor : public PostProcessor {
public:
  std::vector<int64_t> before, after;
  void process(std::vector<int64_t> &ids) const override {
    ids.insert(ids.begin(), before.begin(), before.end());
    ids.insert(ids.end(), after.begin(), after.end());
  }
};

/// A [token, id] pair of BertProcessing/RobertaProcessing.
Expected<int64_t> pairId(const JsonReader &reader, const json &node,
                         const std::string &path, const char *key) {
  std::string p = JsonReader::join(path, key);
  const json *v = JsonReader::find(node, key);
  if (!v || !v->is_array() || v->size() != 2 || !(*v)[0].is_string())
    return reader.fail(p, "expected [token, id]");
  return reader.asInteger((*v)[1], p + "[1]");
}

/// The ids of one special token of a template ("special_tokens").
Expected<std::vector<int64_t>> templateIds(const JsonReader &reader,
                                           const json &node,
                                           const std::string &path,
                                           const std::string &name) {
  const json *specials = JsonReader::find(node, "special_tokens");
  std::string p = JsonReader::join(path, "special_tokens") + "." + name;
  const json *entry =
      specials ? JsonReader::find(*specials, name.c_str()) : nullptr;
  if (!entry)
    return reader.fail(p, "missing (used by the template)");
  Expected<const json *> ids = reader.array(*entry, p, "ids");
  if (!ids)
    return ids.takeError();
  std::vector<int64_t> out;
  for (size_t i = 0; i < (*ids)->size(); ++i) {
    Expected<int64_t> id =
        reader.asInteger((**ids)[i], JsonReader::index(p + ".ids", i));
    if (!id)
      return id.takeError();
    out.push_back(*id);
  }
  return out;
}

/// TemplateProcessing's single template: [{"SpecialToken": {"id": ...}},
/// {"Sequence": {"id": "A"}}, ...] or "[CLS]:0 $A:0 [SEP]:0".
Expected<std::unique_ptr<PostProcessor>>
parseTemplate(const JsonReader &reader, const json &node,
              const std::string &path) {
  auto wrap = std::make_unique<WrapProcessor>();
  std::string p = JsonReader::join(path, "single");
  const json *single = JsonReader::find(node, "single");
  if (!single)
    return reader.fail(p, "missing");
  // Each piece as (special token name or "" for the sequence).
  std::vector<std::string> pieces;
  auto addStringPiece = [&](const std::string &s) {
    std::string id = s.substr(0, s.find(':'));
    pieces.push_back(!id.empty() && id[0] == '$' ? "" : id);
  };
  if (single->is_string()) {
    const std::string &s = single->get_ref<const std::string &>();
    for (size_t start = 0; start <= s.size();) {
      size_t end = s.find(' ', start);
      if (end == std::string::npos)
        end = s.size();
      if (end > start)
        addStringPiece(s.substr(start, end - start));
      start = end + 1;
    }
  } else if (single->is_array()) {
    for (size_t i = 0; i < single->size(); ++i) {
      const json &piece = (*single)[i];
      std::string pp = JsonReader::index(p, i);
      if (piece.is_string()) {
        addStringPiece(piece.get_ref<const std::string &>());
      } else if (const json *st = JsonReader::find(piece, "SpecialToken")) {
        Expected<std::string> id =
            reader.string(*st, pp + ".SpecialToken", "id");
        if (!id)
          return id.takeError();
        pieces.push_back(*id);
      } else if (JsonReader::find(piece, "Sequence")) {
        pieces.push_back("");
      } else {
        return reader.fail(pp, "expected a SpecialToken or a Sequence");
      }
    }
  } else {
    return reader.fail(p, "expected an array");
  }
  bool afterSequence = false;
  for (const std::string &piece : pieces) {
    if (piece.empty()) {
      afterSequence = true;
      continue;
    }
    Expected<std::vector<int64_t>> ids = templateIds(reader, node, path, piece);
    if (!ids)
      return ids.takeError();
    auto &dst = afterSequence ? wrap->after : wrap->before;
    dst.insert(dst.end(), ids->begin(), ids->end());
  }
  return std::unique_ptr<PostProcessor>(std::move(wrap));
}

} // namespace

Expected<std::unique_ptr<PostProcessor>>
tok::parsePostProcessor(const JsonReader &reader, const json &node,
                        const std::string &path) {
  using Result = std::unique_ptr<PostProcessor>;
  Expected<std::string> type = reader.type(node, path);
  if (!type)
    return type.takeError();
  const std::string &t = *type;
  if (t == "Sequence") {
    auto members = parseSequence<PostProcessor>(
        reader, node, path, "processors", parsePostProcessor);
    if (!members)
      return members.takeError();
    auto seq = std::make_unique<SequenceProcessor>();
    seq->processors = members.take();
    return std::unique_ptr<PostProcessor>(std::move(seq));
  }
  if (t == "ByteLevel")
    return Result(std::make_unique<NoopProcessor>());
  if (t == "BertProcessing" || t == "RobertaProcessing") {
    auto wrap = std::make_unique<WrapProcessor>();
    Expected<int64_t> cls = pairId(reader, node, path, "cls");
    if (!cls)
      return cls.takeError();
    Expected<int64_t> sep = pairId(reader, node, path, "sep");
    if (!sep)
      return sep.takeError();
    wrap->before.push_back(*cls);
    wrap->after.push_back(*sep);
    return Result(std::move(wrap));
  }
  if (t == "TemplateProcessing")
    return parseTemplate(reader, node, path);
  return reader.unsupported(JsonReader::join(path, "type"), t);
}
