//===- xfmr-tokenize.cpp - encode and decode with a tokenizer.json --------===//
//
// Part of xfmr.
//
//   xfmr-tokenize TOKENIZER --text "Hello world"
//   xfmr-tokenize TOKENIZER --encode-jsonl texts.jsonl > ids.jsonl
//   xfmr-tokenize TOKENIZER --decode-jsonl ids.jsonl [--stream]
//   xfmr-tokenize TOKENIZER --bench corpus.txt
//   xfmr-tokenize chat ...            (RenderChat.cpp)
//
// A thin main over runtime/include/xfmr/runtime/Tokenizer.h; the lines it
// reads and writes are JSON, so that scripts/check-tokenizer.py can compare
// them with the Python `tokenizers`.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/Text.h"
#include "xfmr/runtime/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>

using namespace xfmr::rt;
using json = nlohmann::json;

int renderChatMain(int argc, char **argv);

namespace {

const char *const kUsage =
    "usage: xfmr-tokenize TOKENIZER [--text STR | --encode-jsonl FILE |\n"
    "                     --decode-jsonl FILE [--stream] | --bench FILE\n"
    "                     [--repeat N]] [--no-special] [--keep-special]\n"
    "       xfmr-tokenize chat ...   (render a chat template; 'chat --help')\n";

const char *const kHelp =
    "\n"
    "Encodes and decodes text with a Hugging Face tokenizer.json, as the\n"
    "Python `tokenizers` does (docs/tokenizer.md). TOKENIZER is a\n"
    "tokenizer.json or a folder holding one (a model or an artifact folder).\n"
    "\n"
    "  --text STR           print the ids of STR as a JSON array\n"
    "  --encode-jsonl FILE  each line a JSON string, or {\"hex\": \"..\"} for\n"
    "                       raw bytes: print its ids as a JSON array\n"
    "  --decode-jsonl FILE  each line a JSON array of ids: print the decoded\n"
    "                       text as a JSON string\n"
    "  --stream             with --decode-jsonl: decode through DecodeStream\n"
    "                       one id at a time and print the concatenated\n"
    "                       pieces (fails if a piece is not valid UTF-8)\n"
    "  --bench FILE         encode FILE's lines on one thread, --repeat N\n"
    "                       times (default 5) after a first pass, and print "
    "MB/s\n"
    "  --no-special         encode without the post-processor's special "
    "tokens\n"
    "  --keep-special       decode special tokens too (skipped by default)\n";

struct Options {
  std::string tokenizer;
  std::string mode; // text, encode, decode, bench
  std::string arg;
  bool stream = false, addSpecial = true, skipSpecial = true;
  int64_t repeat = 5;
};

/// TOKENIZER as a file: itself, or DIR/tokenizer.json.
std::string tokenizerFile(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return path + "/tokenizer.json";
  return path;
}

bool parseOptions(int argc, char **argv, Options &opts) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &dst) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "xfmr-tokenize: %s needs a value\n", a.c_str());
        return false;
      }
      dst = argv[++i];
      return true;
    };
    if (a == "--text" || a == "--encode-jsonl" || a == "--decode-jsonl" ||
        a == "--bench") {
      if (!opts.mode.empty()) {
        std::fprintf(stderr, "xfmr-tokenize: give one of --text, "
                             "--encode-jsonl, --decode-jsonl, --bench\n");
        return false;
      }
      opts.mode = a == "--text"           ? "text"
                  : a == "--encode-jsonl" ? "encode"
                  : a == "--decode-jsonl" ? "decode"
                                          : "bench";
      if (!value(opts.arg))
        return false;
    } else if (a == "--stream") {
      opts.stream = true;
    } else if (a == "--no-special") {
      opts.addSpecial = false;
    } else if (a == "--keep-special") {
      opts.skipSpecial = false;
    } else if (a == "--repeat") {
      std::string v;
      if (!value(v) || !parseInt(v, 1, 1000000, opts.repeat)) {
        std::fprintf(stderr,
                     "xfmr-tokenize: --repeat needs a positive integer\n");
        return false;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "xfmr-tokenize: unknown option %s\n%s", a.c_str(),
                   kUsage);
      return false;
    } else if (opts.tokenizer.empty()) {
      opts.tokenizer = a;
    } else {
      std::fprintf(stderr, "xfmr-tokenize: unexpected argument %s\n",
                   a.c_str());
      return false;
    }
  }
  if (opts.tokenizer.empty() || opts.mode.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return false;
  }
  if (opts.stream && opts.mode != "decode") {
    std::fprintf(stderr, "xfmr-tokenize: --stream goes with --decode-jsonl\n");
    return false;
  }
  return true;
}

std::string idsJson(const std::vector<int64_t> &ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

std::string stringJson(const std::string &s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Raw bytes from a hex string; false on odd length or a non-hex digit.
bool fromHex(const std::string &hex, std::string &out) {
  if (hex.size() % 2)
    return false;
  auto digit = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  out.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

/// Whether `s` is well-formed UTF-8 (the pieces of --stream).
bool validUtf8(const std::string &s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (!len || i + len > s.size())
      return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        return false;
    unsigned char c1 =
        static_cast<unsigned char>(s[i + 1 < s.size() ? i + 1 : i]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) ||
        (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
      return false;
    i += len;
  }
  return true;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "xfmr-tokenize: %s\n", message.c_str());
  return 1;
}

int encodeLines(const Tokenizer &tok, const Options &opts) {
  std::ifstream in(opts.arg, std::ios::binary);
  if (!in)
    return fail(opts.arg + ": cannot open");
  std::string line, bytes;
  for (size_t lineNo = 1; std::getline(in, line); ++lineNo) {
    json v = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = opts.arg + ":" + std::to_string(lineNo);
    if (v.is_string()) {
      bytes = v.get_ref<const std::string &>();
    } else if (v.is_object() && v.size() == 1 && v.contains("hex") &&
               v["hex"].is_string()) {
      if (!fromHex(v["hex"].get_ref<const std::string &>(), bytes))
        return fail(where + ": bad hex string");
    } else {
      return fail(where + ": expected a JSON string or {\"hex\": ...}");
    }
    std::string out = idsJson(tok.encode(bytes, opts.addSpecial));
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

int decodeLines(const Tokenizer &tok, const Options &opts) {
  std::ifstream in(opts.arg, std::ios::binary);
  if (!in)
    return fail(opts.arg + ": cannot open");
  std::string line;
  for (size_t lineNo = 1; std::getline(in, line); ++lineNo) {
    const std::string where = opts.arg + ":" + std::to_string(lineNo);
    json v = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!v.is_array())
      return fail(where + ": expected a JSON array of ids");
    std::vector<int64_t> ids;
    for (const json &id : v) {
      if (!id.is_number_integer())
        return fail(where + ": expected integer ids");
      ids.push_back(id.get<int64_t>());
    }
    std::string text;
    if (!opts.stream) {
      text = tok.decode(ids, opts.skipSpecial);
    } else {
      DecodeStream stream(tok, opts.skipSpecial);
      for (size_t k = 0; k <= ids.size(); ++k) {
        std::string piece =
            k < ids.size() ? stream.step(ids[k]) : stream.flush();
        if (!validUtf8(piece))
          return fail(where + ": DecodeStream piece " + std::to_string(k) +
                      " is not valid UTF-8");
        text += piece;
      }
    }
    std::string out = stringJson(text);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

int bench(const Tokenizer &tok, const Options &opts) {
  std::ifstream in(opts.arg, std::ios::binary);
  if (!in)
    return fail(opts.arg + ": cannot open");
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    line += '\n';
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  size_t tokens = 0;
  // Wall and CPU seconds of one pass over the lines (CPU time is what a
  // shared machine leaves comparable).
  auto pass = [&](double &cpu) {
    std::clock_t c0 = std::clock();
    auto start = std::chrono::steady_clock::now();
    for (const std::string &l : lines)
      tokens += tok.encode(l, opts.addSpecial).size();
    cpu += double(std::clock() - c0) / CLOCKS_PER_SEC;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  double firstCpu = 0, cpu = 0;
  double first = pass(firstCpu);
  tokens = 0;
  double total = 0;
  for (int64_t r = 0; r < opts.repeat; ++r)
    total += pass(cpu);
  double mb = double(bytes) / 1e6;
  std::printf("%zu lines, %.2f MB, %zu tokens per pass, one thread\n",
              lines.size(), mb, tokens / size_t(opts.repeat));
  std::printf(
      "first pass (empty word cache): %.1f MB/s (%.1f MB/s of CPU time)\n",
      mb / first, mb / firstCpu);
  std::printf("%lld more passes: %.1f MB/s (%.1f MB/s of CPU time)\n",
              static_cast<long long>(opts.repeat),
              mb * double(opts.repeat) / total, mb * double(opts.repeat) / cpu);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "chat") == 0)
    return renderChatMain(argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s%s", kUsage, kHelp);
      return 0;
    }
  Options opts;
  if (!parseOptions(argc, argv, opts))
    return 2;
  Expected<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::fromFile(tokenizerFile(opts.tokenizer));
  if (!tok)
    return fail(tok.error());
  if (opts.mode == "text") {
    std::string out = idsJson((*tok)->encode(opts.arg, opts.addSpecial));
    std::printf("%s\n", out.c_str());
    return 0;
  }
  if (opts.mode == "encode")
    return encodeLines(**tok, opts);
  if (opts.mode == "decode")
    return decodeLines(**tok, opts);
  return bench(**tok, opts);
}
