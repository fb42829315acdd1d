//===- RenderChat.cpp - xfmr-tokenize chat --------------------------------===//
//
// Part of xfmr.
//
//   xfmr-tokenize chat --template FILE.jinja|tokenizer_config.json
//                      --render-jsonl CONVERSATIONS.jsonl
//                      [--bos-token S] [--eos-token S]
//
// Renders every line of CONVERSATIONS.jsonl (a JSON object: the template's
// variables, e.g. {"messages": [...], "add_generation_prompt": true}) with
// the chat template and prints one line per input line: the rendering as a
// JSON string, or {"error": "..."} when the template raised or failed. As
// transformers' render_jinja_template does, `tools` and `documents` are
// None when a line does not give them; `bos_token`/`eos_token` come from the
// flags, or from tokenizer_config.json, unless the line sets them.
// scripts/check-chat-template.py compares the output with transformers'.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/ChatTemplate.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

using xfmr::rt::ChatTemplate;
using Json = nlohmann::ordered_json;

namespace {

struct Options {
  std::string templatePath;
  std::string inputPath;
  std::optional<std::string> bos, eos;
};

void usage() {
  std::fprintf(stderr, "usage: xfmr-tokenize chat --template FILE.jinja|"
                       "tokenizer_config.json --render-jsonl FILE.jsonl "
                       "[--bos-token S] [--eos-token S]\n");
}

bool parseOptions(int argc, char **argv, Options &opts) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "xfmr-tokenize chat: %s needs a value\n",
                   arg.c_str());
      return false;
    }
    std::string value = argv[++i];
    if (arg == "--template")
      opts.templatePath = value;
    else if (arg == "--render-jsonl")
      opts.inputPath = value;
    else if (arg == "--bos-token")
      opts.bos = value;
    else if (arg == "--eos-token")
      opts.eos = value;
    else {
      std::fprintf(stderr, "xfmr-tokenize chat: unknown option %s\n",
                   arg.c_str());
      return false;
    }
  }
  return !opts.templatePath.empty() && !opts.inputPath.empty();
}

bool readFile(const std::string &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  text = ss.str();
  return true;
}

/// A special token of tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> specialToken(const Json &config, const char *key) {
  auto it = config.find(key);
  if (it == config.end())
    return std::nullopt;
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_object() && it->contains("content") &&
      (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

/// The template of a tokenizer_config.json: "chat_template" as a string, or
/// the one named "default" of a list of {"name", "template"}.
bool templateFromConfig(const std::string &text, Options &opts,
                        std::string &source) {
  Json config = Json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object() ||
      !config.contains("chat_template"))
    return false;
  const Json &t = config["chat_template"];
  if (t.is_string())
    source = t.get<std::string>();
  for (const Json &named : t.is_array() ? t : Json::array()) {
    if (!named.is_object() || !named.contains("name") ||
        !named.contains("template"))
      continue;
    const Json &name = named["name"], &body = named["template"];
    if (name.is_string() && name.get<std::string>() == "default" &&
        body.is_string())
      source = body.get<std::string>();
  }
  if (source.empty())
    return false;
  if (!opts.bos)
    opts.bos = specialToken(config, "bos_token");
  if (!opts.eos)
    opts.eos = specialToken(config, "eos_token");
  return true;
}

std::string renderLine(const ChatTemplate &tmpl, const std::string &line,
                       const Options &opts) {
  Json context = Json::parse(line, nullptr, false);
  if (context.is_discarded() || !context.is_object())
    return Json{{"error", "not a JSON object"}}.dump();
  for (const char *key : {"tools", "documents"})
    if (!context.contains(key))
      context[key] = nullptr;
  if (opts.bos && !context.contains("bos_token"))
    context["bos_token"] = *opts.bos;
  if (opts.eos && !context.contains("eos_token"))
    context["eos_token"] = *opts.eos;
  auto rendered = tmpl.render(context);
  Json out = rendered ? Json(*rendered) : Json{{"error", rendered.error()}};
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

} // namespace

int renderChatMain(int argc, char **argv) {
  Options opts;
  if (!parseOptions(argc, argv, opts)) {
    usage();
    bool help = argc > 2 && (std::strcmp(argv[2], "--help") == 0 ||
                             std::strcmp(argv[2], "-h") == 0);
    return help ? 0 : 2;
  }
  std::string text, source;
  if (!readFile(opts.templatePath, text)) {
    std::fprintf(stderr, "xfmr-tokenize chat: cannot read %s\n",
                 opts.templatePath.c_str());
    return 1;
  }
  bool isConfig =
      opts.templatePath.size() >= 5 &&
      opts.templatePath.compare(opts.templatePath.size() - 5, 5, ".json") == 0;
  if (!isConfig)
    source = text;
  else if (!templateFromConfig(text, opts, source)) {
    std::fprintf(stderr, "xfmr-tokenize chat: %s has no chat_template\n",
                 opts.templatePath.c_str());
    return 1;
  }
  auto tmpl = ChatTemplate::parse(source, opts.templatePath);
  if (!tmpl) {
    std::fprintf(stderr, "error: %s\n", tmpl.error().c_str());
    return 1;
  }
  std::ifstream in(opts.inputPath);
  if (!in) {
    std::fprintf(stderr, "xfmr-tokenize chat: cannot read %s\n",
                 opts.inputPath.c_str());
    return 1;
  }
  std::string line;
  while (std::getline(in, line))
    if (!line.empty())
      std::cout << renderLine(**tmpl, line, opts) << "\n";
  return 0;
}
