//===- TokenizerTest.cpp - tokenizer.json models, DecodeStream, threads ---===//
//
// Part of xfmr.
//
// Checks runtime/Tokenizer.h on tokenizer.json files small enough to read:
// a byte-level BPE, a BERT WordPiece and a SentencePiece-style BPE with
// byte fallback, each encoded and decoded by hand; invalid UTF-8 replaced
// as Python's decode("utf-8", "replace") does; DecodeStream never returning
// part of a character; encode() from several threads at once; errors that
// name the JSON path. test/Tokenizer compares real tokenizers with the
// Python `tokenizers` over a corpus.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace xfmr::rt;

namespace {

std::unique_ptr<Tokenizer> load(const std::string &json) {
  Expected<std::unique_ptr<Tokenizer>> tok = Tokenizer::fromJson(json, "test");
  EXPECT_TRUE(tok.ok()) << tok.error();
  return tok.ok() ? tok.take() : nullptr;
}

/// GPT-2 style: ByteLevel pre-tokenizer and decoder ("Ġ" is the space).
const char *const kByteLevelBpe = R"({
  "added_tokens": [{"id": 17, "content": "<|endoftext|>", "special": true,
                    "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                    "use_regex": true},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4,
    "w": 5, "r": 6, "d": 7, "he": 8, "ll": 9, "llo": 10, "hello": 11,
    "Ġw": 12, "or": 13, "Ġwor": 14, "Ġworl": 15, "Ġworld": 16},
    "merges": ["h e", "l l", "ll o", "he llo", "Ġ w", "o r", "Ġw or",
               ["Ġwor", "l"], "Ġworl d"]}
})";

/// all-MiniLM style: BertNormalizer, BertPreTokenizer, WordPiece.
const char *const kWordPiece = R"({
  "added_tokens": [
    {"id": 0, "content": "[UNK]", "special": true, "normalized": false},
    {"id": 1, "content": "[CLS]", "special": true, "normalized": false},
    {"id": 2, "content": "[SEP]", "special": true, "normalized": false}],
  "normalizer": {"type": "BertNormalizer", "clean_text": true,
                 "handle_chinese_chars": true, "strip_accents": null,
                 "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2],
                     "cls": ["[CLS]", 1]},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]",
    "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
    "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##aff": 4,
              "##able": 5, "cafe": 6, "!": 7, "東": 8}}
})";

/// Llama-2 style: SentencePiece BPE with <0x00>..<0xFF> byte fallback.
std::string spmByteFallback() {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  for (int b = 0; b < 256; ++b) {
    char entry[32];
    std::snprintf(entry, sizeof entry, ", \"<0x%02X>\": %d", b, 3 + b);
    vocab += entry;
  }
  vocab += R"(, "▁": 259, "a": 260, "▁a": 261, "b": 262, "ab": 263,
              "▁ab": 264)";
  return R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "normalized": false},
    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true,
    "fuse_unk": true, "vocab": {)" +
         vocab + R"(}, "merges": ["▁ a", "a b", "▁a b"]}
})";
}

std::vector<int64_t> ids(std::initializer_list<int64_t> l) { return l; }

TEST(TokenizerTest, ByteLevelBpe) {
  auto tok = load(kByteLevelBpe);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("hello world"), ids({11, 16}));
  // "hello" and " world" are separate words: no merge across them.
  EXPECT_EQ(tok->encode("helloworld"), ids({11, 5, 13, 2, 7}));
  EXPECT_EQ(tok->encode("hello<|endoftext|> world"), ids({11, 17, 16}));
  EXPECT_EQ(tok->decode({11, 17, 16}), "hello world");
  EXPECT_EQ(tok->decode({11, 17, 16}, /*skipSpecialTokens=*/false),
            "hello<|endoftext|> world");
  EXPECT_EQ(tok->tokenToId("Ġworld"), 16);
  EXPECT_EQ(tok->idToToken(17), "<|endoftext|>");
  EXPECT_EQ(tok->vocabSize(), 18);
  EXPECT_TRUE(tok->isSpecial(17));
  EXPECT_FALSE(tok->isSpecial(16));
}

TEST(TokenizerTest, WordPiece) {
  auto tok = load(kWordPiece);
  ASSERT_TRUE(tok);
  // Lowercased, accents stripped, CJK isolated, "!" split off; an unknown
  // word becomes [UNK] whole.
  EXPECT_EQ(tok->encode("UnAffable Café!東 xyz"),
            ids({1, 3, 4, 5, 6, 7, 8, 0, 2}));
  EXPECT_EQ(tok->encode("unable", /*addSpecialTokens=*/false), ids({3, 5}));
  EXPECT_EQ(tok->decode({1, 3, 4, 5, 6, 7, 2}), "unaffable cafe!");
}

TEST(TokenizerTest, SentencePieceByteFallback) {
  auto tok = load(spmByteFallback());
  ASSERT_TRUE(tok);
  // "▁ab" merges; "😀" (F0 9F 98 80) is not in the vocabulary: 4 bytes.
  std::vector<int64_t> expected = {1,        264,      259,     3 + 0xF0,
                                   3 + 0x9F, 3 + 0x98, 3 + 0x80};
  EXPECT_EQ(tok->encode("ab 😀"), expected);
  EXPECT_EQ(tok->decode(expected), "ab 😀");
  // Half a character decodes to one U+FFFD per byte, as tokenizers does.
  EXPECT_EQ(tok->decode({261, 3 + 0xF0, 3 + 0x9F}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerTest, InvalidUtf8IsReplaced) {
  auto tok = load(kByteLevelBpe);
  ASSERT_TRUE(tok);
  // Per maximal ill-formed subsequence: "\xF0\x9F" is one U+FFFD, "\xFF"
  // another.
  EXPECT_EQ(tok->encode("he\xF0\x9Fllo\xFF"),
            tok->encode("he\xEF\xBF\xBDllo\xEF\xBF\xBD"));
}

/// Feeds `ids` one at a time; checks that every piece is whole characters
/// and that the pieces add up to decode(ids).
void checkStream(const Tokenizer &tok, const std::vector<int64_t> &ids,
                 std::vector<std::string> *pieces = nullptr) {
  DecodeStream stream(tok);
  std::string all;
  for (size_t i = 0; i <= ids.size(); ++i) {
    std::string piece = i < ids.size() ? stream.step(ids[i]) : stream.flush();
    // A piece never ends inside a character: no trailing lead or
    // continuation byte of an unfinished sequence.
    size_t k = piece.size();
    size_t cont = 0;
    while (k > 0 && (static_cast<unsigned char>(piece[k - 1]) & 0xC0) == 0x80) {
      --k;
      ++cont;
    }
    if (k > 0) {
      unsigned char lead = static_cast<unsigned char>(piece[k - 1]);
      size_t need = lead < 0x80 ? 0 : lead < 0xE0 ? 1 : lead < 0xF0 ? 2 : 3;
      EXPECT_EQ(cont, need) << "piece " << i << " ends inside a character";
    }
    if (pieces)
      pieces->push_back(piece);
    all += piece;
  }
  EXPECT_EQ(all, tok.decode(ids));
}

TEST(TokenizerTest, DecodeStreamKeepsCharactersWhole) {
  auto tok = load(spmByteFallback());
  ASSERT_TRUE(tok);
  std::vector<int64_t> emoji = {3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80};
  std::vector<int64_t> text = {1, 264};
  text.insert(text.end(), emoji.begin(), emoji.end());
  text.push_back(261);
  std::vector<std::string> pieces;
  checkStream(*tok, text, &pieces);
  // The emoji comes out whole, once the run of byte tokens has ended.
  ASSERT_EQ(pieces.size(), text.size() + 1);
  EXPECT_EQ(pieces[1], "ab");
  for (size_t i = 2; i <= 5; ++i)
    EXPECT_EQ(pieces[i], "") << i;
  EXPECT_EQ(pieces[6], "😀 a");
  // A broken run: what was valid so far turns into U+FFFD with it.
  checkStream(*tok, {261, 3 + 0xC3, 3 + 0xA9, 3 + 0x41, 3 + 0x80, 264});
  checkStream(*tok, {3 + 0xF0, 3 + 0x9F});
  checkStream(*tok, {2, 261, 1, 3 + 0xE2, 2, 3 + 0x82, 3 + 0xAC, 259, 264});

  auto bytes = load(kByteLevelBpe);
  ASSERT_TRUE(bytes);
  checkStream(*bytes, bytes->encode("hello 😀 world é"));
}

TEST(TokenizerTest, DecodeStreamAfterAPrompt) {
  auto tok = load(spmByteFallback());
  ASSERT_TRUE(tok);
  // After the prompt "a", "▁ab" keeps its space: the Strip decoder only
  // removes the space at the very start of the text.
  std::vector<int64_t> prompt = {1, 261}, generated = {264, 259, 261};
  DecodeStream stream(*tok, /*skipSpecialTokens=*/true, prompt);
  std::string text;
  for (int64_t id : generated)
    text += stream.step(id);
  text += stream.flush();
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  EXPECT_EQ(text, " ab  a");
  EXPECT_EQ(tok->decode(prompt) + text, tok->decode(all));
}

TEST(TokenizerTest, EncodesFromManyThreads) {
  auto tok = load(kByteLevelBpe);
  ASSERT_TRUE(tok);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("hello world " + std::to_string(i) + " world" +
                    std::string(size_t(i % 7), 'l') + " hello");
  std::vector<std::vector<int64_t>> expected;
  for (const std::string &t : texts)
    expected.push_back(tok->encode(t));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round)
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i * 7 + size_t(t) * 13 + size_t(round)) % texts.size();
          failures[size_t(t)] += tok->encode(texts[k]) != expected[k];
        }
    });
  for (std::thread &th : threads)
    th.join();
  for (int f : failures)
    EXPECT_EQ(f, 0);
}

TEST(TokenizerTest, ErrorsNameTheJsonPath) {
  Expected<std::unique_ptr<Tokenizer>> bad = Tokenizer::fromJson(
      R"({"model": {"type": "Unigram", "vocab": []}})", "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "t.json: model.type 'Unigram' is not supported");
  bad = Tokenizer::fromJson(R"({"model": )", "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("t.json: invalid JSON"), std::string::npos);
  bad = Tokenizer::fromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
          "decoder": {"type": "CTC"}})",
      "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "t.json: decoder.type 'CTC' is not supported");
  bad = Tokenizer::fromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a zz"]}})",
      "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "t.json: model.merges[0]: token 'zz' is not in the vocabulary");
  bad = Tokenizer::fromFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "/nonexistent/tokenizer.json: cannot open: No such file or "
            "directory");
}

} // namespace
