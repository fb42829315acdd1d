//===- TokenizerFiles.cpp - a model folder's text interface ---------------===//
//
// Part of xfmr.
//
// The files are read here, before anything is compiled, so that a malformed
// one fails the compile at once; they are written into the temporary
// artifact directory with the other files, and the directory is renamed
// into place only when all of it is written (xfmr-compile.cpp,
// commitArtifact).
//
//===----------------------------------------------------------------------===//

#include "TokenizerFiles.h"

#include "xfmr/runtime/Digest.h"
#include "xfmr/runtime/Manifest.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace xfmr::compile;
namespace json = llvm::json;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string joinPath(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// The bytes of `path`.
llvm::Expected<std::string> readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path + ": " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

/// `text` (the file `path`) as a JSON object.
llvm::Expected<json::Object> parseObject(llvm::StringRef text,
                                         const std::string &path) {
  llvm::Expected<json::Value> value = json::parse(text);
  if (!value)
    return fail(path +
                ": not valid JSON: " + llvm::toString(value.takeError()));
  json::Object *object = value->getAsObject();
  if (!object)
    return fail(path + ": expected a JSON object");
  return std::move(*object);
}

/// The optional JSON file `name` of `dir` as an object; nothing when absent.
llvm::Expected<std::optional<json::Object>>
readOptionalObject(llvm::StringRef dir, llvm::StringRef name) {
  if (dir.empty())
    return std::nullopt;
  std::string path = joinPath(dir, name);
  if (!llvm::sys::fs::exists(path))
    return std::nullopt;
  llvm::Expected<std::string> text = readFile(path);
  if (!text)
    return text.takeError();
  llvm::Expected<json::Object> object = parseObject(*text, path);
  if (!object)
    return object.takeError();
  return std::optional<json::Object>(std::move(*object));
}

/// A special token of tokenizer_config.json / special_tokens_map.json: a
/// string or an AddedToken {"content": ...}; "" when absent or null.
llvm::Expected<std::string> specialToken(const json::Object &config,
                                         llvm::StringRef key,
                                         const std::string &path) {
  const json::Value *v = config.get(key);
  if (!v || v->getAsNull())
    return std::string();
  if (std::optional<llvm::StringRef> s = v->getAsString())
    return s->str();
  if (const json::Object *o = v->getAsObject())
    if (std::optional<llvm::StringRef> content = o->getString("content"))
      return content->str();
  return fail(path + ": " + key +
              ": expected a string or {\"content\": \"...\"}");
}

/// An optional boolean field (null is absent).
llvm::Expected<std::optional<bool>> optionalBool(const json::Object &o,
                                                 llvm::StringRef key,
                                                 const std::string &path) {
  const json::Value *v = o.get(key);
  if (!v || v->getAsNull())
    return std::nullopt;
  if (std::optional<bool> b = v->getAsBoolean())
    return b;
  return fail(path + ": " + key + ": expected true or false");
}

/// The chat template of tokenizer_config.json: a string, or a list of
/// {"name", "template"} of which "default" is taken.
llvm::Expected<std::string> configChatTemplate(const json::Object &config,
                                               const std::string &path) {
  const json::Value *v = config.get("chat_template");
  if (!v || v->getAsNull())
    return std::string();
  if (std::optional<llvm::StringRef> s = v->getAsString())
    return s->str();
  const json::Array *list = v->getAsArray();
  if (!list)
    return fail(path +
                ": chat_template: expected a string or a list of {\"name\", "
                "\"template\"}");
  for (const json::Value &entry : *list) {
    const json::Object *o = entry.getAsObject();
    std::optional<llvm::StringRef> name =
        o ? o->getString("name") : std::nullopt;
    std::optional<llvm::StringRef> source =
        o ? o->getString("template") : std::nullopt;
    if (!name || !source)
      return fail(
          path +
          ": chat_template: expected a list of {\"name\", \"template\"}");
    if (*name == "default")
      return source->str();
  }
  return std::string(); // named templates only: none to apply by default
}

/// token -> id of tokenizer.json: its added tokens, then its model's
/// vocabulary (an object for BPE, WordPiece and WordLevel; a list of
/// [piece, score] for Unigram).
llvm::Expected<llvm::StringMap<int64_t>> tokenIds(llvm::StringRef text,
                                                  const std::string &path) {
  llvm::Expected<json::Object> root = parseObject(text, path);
  if (!root)
    return root.takeError();
  llvm::StringMap<int64_t> ids;
  if (const json::Array *added = root->getArray("added_tokens"))
    for (const json::Value &t : *added)
      if (const json::Object *o = t.getAsObject())
        if (auto content = o->getString("content"))
          if (auto id = o->getInteger("id"))
            ids.try_emplace(*content, *id);
  if (const json::Object *model = root->getObject("model")) {
    if (const json::Object *vocab = model->getObject("vocab")) {
      for (const auto &[token, id] : *vocab)
        if (std::optional<int64_t> n = id.getAsInteger())
          ids.try_emplace(token.str(), *n);
    } else if (const json::Array *pieces = model->getArray("vocab")) {
      for (size_t i = 0; i < pieces->size(); ++i)
        if (const json::Array *piece = (*pieces)[i].getAsArray())
          if (!piece->empty())
            if (auto s = piece->front().getAsString())
              ids.try_emplace(*s, static_cast<int64_t>(i));
    }
  }
  return ids;
}

/// generation_config.json's eos ids and sampling defaults.
llvm::Error readGenerationConfig(const json::Object &config,
                                 const std::string &path,
                                 std::vector<int64_t> &eosIds,
                                 xfmr::rt::GenerationDefaults &defaults) {
  if (const json::Value *v = config.get("eos_token_id"); v && !v->getAsNull()) {
    std::vector<const json::Value *> list;
    if (const json::Array *a = v->getAsArray())
      for (const json::Value &id : *a)
        list.push_back(&id);
    else
      list.push_back(v);
    for (const json::Value *id : list) {
      std::optional<int64_t> n = id->getAsInteger();
      if (!n || *n < 0 || list.size() > 64)
        return fail(
            path +
            ": eos_token_id must be a non-negative id or a list of at most 64");
      eosIds.push_back(*n);
    }
  }
  llvm::Expected<std::optional<bool>> doSample =
      optionalBool(config, "do_sample", path);
  if (!doSample)
    return doSample.takeError();
  defaults.doSample = *doSample;
  for (auto [key, out] :
       {std::pair<const char *, std::optional<double> *>{"temperature",
                                                         &defaults.temperature},
        {"top_p", &defaults.topP},
        {"repetition_penalty", &defaults.repetitionPenalty}}) {
    const json::Value *v = config.get(key);
    if (!v || v->getAsNull())
      continue;
    std::optional<double> n = v->getAsNumber();
    if (!n)
      return fail(path + ": " + key + ": expected a number");
    *out = *n;
  }
  for (auto [key, out] : {std::pair<const char *, std::optional<int64_t> *>{
                              "top_k", &defaults.topK},
                          {"max_new_tokens", &defaults.maxNewTokens},
                          {"max_length", &defaults.maxLength}}) {
    const json::Value *v = config.get(key);
    if (!v || v->getAsNull())
      continue;
    std::optional<int64_t> n = v->getAsInteger();
    if (!n)
      return fail(path + ": " + key + ": expected an integer");
    *out = *n;
  }
  if (xfmr::rt::Status s = xfmr::rt::validateGenerationDefaults(defaults); !s)
    return fail(path + ": " + s.error());
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::optional<TokenizerFiles>> xfmr::compile::readTokenizerFiles(
    llvm::StringRef tokenizer, llvm::StringRef modelFolder,
    llvm::ArrayRef<int64_t> extraEosIds, std::string &note,
    llvm::function_ref<void(const llvm::Twine &)> warn) {
  // Where tokenizer.json and the configuration files come from.
  std::string tokenizerPath, configDir;
  if (!tokenizer.empty()) {
    if (llvm::sys::fs::is_directory(tokenizer)) {
      configDir = tokenizer.str();
      tokenizerPath = joinPath(tokenizer, rt::kTokenizerFileName);
      if (!llvm::sys::fs::exists(tokenizerPath))
        return fail(tokenizer + ": no tokenizer.json in the tokenizer folder");
    } else if (llvm::sys::fs::exists(tokenizer)) {
      tokenizerPath = tokenizer.str();
      configDir = modelFolder.str();
    } else {
      return fail(tokenizer + ": no such file or folder (--tokenizer)");
    }
  } else {
    if (modelFolder.empty())
      return std::nullopt;
    configDir = modelFolder.str();
    tokenizerPath = joinPath(modelFolder, rt::kTokenizerFileName);
    if (!llvm::sys::fs::exists(tokenizerPath)) {
      note = (modelFolder +
              ": no tokenizer.json, so the artifact has no text interface "
              "(--tokenizer adds one)")
                 .str();
      return std::nullopt;
    }
  }

  TokenizerFiles out;
  rt::TextInterface &text = out.text;
  llvm::Expected<std::string> tokenizerJson = readFile(tokenizerPath);
  if (!tokenizerJson)
    return tokenizerJson.takeError();
  llvm::Expected<llvm::StringMap<int64_t>> vocab =
      tokenIds(*tokenizerJson, tokenizerPath);
  if (!vocab)
    return vocab.takeError();
  text.tokenizerFile = rt::kTokenizerFileName;
  out.files.emplace_back(rt::kTokenizerFileName, std::move(*tokenizerJson));
  text.from.push_back(rt::kTokenizerFileName);

  // tokenizer_config.json: special tokens, add_bos_token, maybe the
  // template; special_tokens_map.json for what it does not say.
  std::string bos, eos, chatTemplate;
  std::optional<bool> addBos, addEos;
  std::string configPath =
      configDir.empty() ? ""
                        : joinPath(configDir, rt::kTokenizerConfigFileName);
  if (!configPath.empty() && llvm::sys::fs::exists(configPath)) {
    llvm::Expected<std::string> configText = readFile(configPath);
    if (!configText)
      return configText.takeError();
    llvm::Expected<json::Object> config = parseObject(*configText, configPath);
    if (!config)
      return config.takeError();
    llvm::Expected<std::string> b =
        specialToken(*config, "bos_token", configPath);
    if (!b)
      return b.takeError();
    llvm::Expected<std::string> e =
        specialToken(*config, "eos_token", configPath);
    if (!e)
      return e.takeError();
    bos = *b;
    eos = *e;
    llvm::Expected<std::optional<bool>> ab =
        optionalBool(*config, "add_bos_token", configPath);
    if (!ab)
      return ab.takeError();
    llvm::Expected<std::optional<bool>> ae =
        optionalBool(*config, "add_eos_token", configPath);
    if (!ae)
      return ae.takeError();
    addBos = *ab;
    addEos = *ae;
    llvm::Expected<std::string> t = configChatTemplate(*config, configPath);
    if (!t)
      return t.takeError();
    chatTemplate = *t;
    text.tokenizerConfigFile = rt::kTokenizerConfigFileName;
    out.files.emplace_back(rt::kTokenizerConfigFileName, std::move(*configText));
    text.from.push_back(rt::kTokenizerConfigFileName);
  }
  llvm::Expected<std::optional<json::Object>> specialMap =
      readOptionalObject(configDir, "special_tokens_map.json");
  if (!specialMap)
    return specialMap.takeError();
  if (*specialMap) {
    std::string path = joinPath(configDir, "special_tokens_map.json");
    for (auto [key, token] :
         {std::pair<const char *, std::string *>{"bos_token", &bos},
          {"eos_token", &eos}}) {
      if (!token->empty())
        continue;
      llvm::Expected<std::string> t = specialToken(**specialMap, key, path);
      if (!t)
        return t.takeError();
      *token = *t;
    }
    text.from.push_back("special_tokens_map.json");
  }

  // The chat template: chat_template.jinja, else chat_template.json, else
  // tokenizer_config.json's (transformers' order).
  if (!configDir.empty()) {
    std::string jinja = joinPath(configDir, "chat_template.jinja");
    std::string jsonPath = joinPath(configDir, "chat_template.json");
    if (llvm::sys::fs::exists(jinja)) {
      llvm::Expected<std::string> source = readFile(jinja);
      if (!source)
        return source.takeError();
      chatTemplate = *source;
      text.from.push_back("chat_template.jinja");
    } else if (llvm::sys::fs::exists(jsonPath)) {
      llvm::Expected<std::optional<json::Object>> o =
          readOptionalObject(configDir, "chat_template.json");
      if (!o)
        return o.takeError();
      std::optional<llvm::StringRef> source = (*o)->getString("chat_template");
      if (!source)
        return fail(jsonPath + ": chat_template: expected a string");
      chatTemplate = source->str();
      text.from.push_back("chat_template.json");
    }
  }
  if (!chatTemplate.empty()) {
    text.chatTemplateFile = rt::kChatTemplateFileName;
    out.files.emplace_back(rt::kChatTemplateFileName, std::move(chatTemplate));
  }

  // generation_config.json: eos ids and sampling defaults.
  std::vector<int64_t> eosIds;
  llvm::Expected<std::optional<json::Object>> generation =
      readOptionalObject(configDir, "generation_config.json");
  if (!generation)
    return generation.takeError();
  if (*generation) {
    if (llvm::Error e = readGenerationConfig(
            **generation, joinPath(configDir, "generation_config.json"), eosIds,
            text.defaults))
      return std::move(e);
    text.from.push_back("generation_config.json");
  }
  eosIds.insert(eosIds.end(), extraEosIds.begin(), extraEosIds.end());

  auto resolve = [&](const std::string &token,
                     const char *what) -> std::optional<int64_t> {
    auto it = vocab->find(token);
    if (it != vocab->end() && it->second >= 0)
      return it->second;
    warn(tokenizerPath + ": " + what + " '" + token +
         "' of tokenizer_config.json is not a token of the tokenizer; its id "
         "is not recorded");
    return std::nullopt;
  };
  text.bosToken = bos;
  if (!bos.empty())
    text.bosId = resolve(bos, "bos_token");
  text.eosToken = eos;
  if (!eos.empty())
    if (std::optional<int64_t> id = resolve(eos, "eos_token"))
      eosIds.push_back(*id);
  for (int64_t id : eosIds)
    if (!llvm::is_contained(text.eosIds, id))
      text.eosIds.push_back(id);
  if (text.eosIds.size() > 64)
    return fail(tokenizerPath + ": more than 64 eos ids");
  text.addBosToken = addBos;
  text.addEosToken = addEos;
  return std::optional<TokenizerFiles>(std::move(out));
}

llvm::Error xfmr::compile::writeTokenizerFiles(
    const TokenizerFiles &text, llvm::StringRef dir,
    std::map<std::string, rt::FileIntegrity> &files) {
  for (const auto &[name, contents] : text.files) {
    std::string path = joinPath(dir, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return fail("cannot write '" + path + "': " + ec.message());
    os << contents;
    os.close();
    if (os.has_error())
      return fail("cannot write '" + path + "': " + os.error().message());
    // Hashed by the code the loader checks with.
    files[name] = {contents.size(),
                   rt::sha256Hex(contents.data(), contents.size())};
  }
  return llvm::Error::success();
}
