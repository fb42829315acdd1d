//===- TextInterface.cpp - an artifact's tokenizer and chat template ------===//
//
// Part of xfmr.
//
// Each file is read whole into memory, hashed and then parsed from those
// bytes: what is used is what was checked (the loader checks model.so and
// weights.bin the same way). nlohmann::json is used without exceptions, as
// in Manifest.cpp.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/TextInterface.h"
#include "xfmr/runtime/Artifact.h"
#include "xfmr/runtime/Digest.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;
using json = nlohmann::json;

namespace {

/// The artifact file `name` of `dir`, whose size and SHA-256 the manifest
/// records as `expected`: a regular file, not a symbolic link.
Expected<std::string> readCheckedFile(const std::string &dir,
                                      const std::string &name,
                                      const FileIntegrity &expected) {
  std::string path = dir + "/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP)
    return Error(path +
                 ": is a symbolic link (artifact files must be regular files)");
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Error(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) != expected.size)
    return Error(path + ": size is " + std::to_string(st.st_size) +
                 " bytes, but " + dir + "/manifest.json says " +
                 std::to_string(expected.size) + " (truncated or replaced?)");
  std::string bytes(static_cast<size_t>(expected.size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return Error(path + ": read failed: " + std::strerror(errno));
    if (got == 0)
      return Error(path + ": shrank while being read");
    done += static_cast<size_t>(got);
  }
  std::string digest = sha256Hex(bytes.data(), bytes.size());
  if (digest != expected.sha256)
    return Error(
        path + ": SHA-256 is " + digest + ", not the one " + dir +
        "/manifest.json records (the file was modified after compilation)");
  return bytes;
}

std::string trimSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

} // namespace

Expected<TextModel> xfmr::rt::loadTextModel(const std::string &directory,
                                            const Manifest &manifest) {
  std::string dir = trimSlashes(directory);
  if (!manifest.text)
    return Error(
        dir +
        " has no tokenizer (compile from a model folder with tokenizer.json "
        "or pass --tokenizer)");
  const TextInterface &t = *manifest.text;
  TextModel model;
  model.name = dir;
  model.bosToken = t.bosToken;
  model.eosToken = t.eosToken;
  model.bosId = t.bosId;
  model.eosIds = t.eosIds;
  model.addBosToken = t.addBosToken;
  model.addEosToken = t.addEosToken;
  model.defaults = t.defaults;

  auto integrity = [&](const std::string &name) -> const FileIntegrity & {
    return t.files.at(name); // parseManifest requires every entry
  };
  Expected<std::string> tokenizerJson =
      readCheckedFile(dir, t.tokenizerFile, integrity(t.tokenizerFile));
  if (!tokenizerJson)
    return tokenizerJson.takeError();
  Expected<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::fromJson(*tokenizerJson, dir + "/" + t.tokenizerFile);
  if (!tokenizer)
    return tokenizer.takeError();
  model.tokenizer = tokenizer.take();

  if (!t.chatTemplateFile.empty()) {
    Expected<std::string> source =
        readCheckedFile(dir, t.chatTemplateFile, integrity(t.chatTemplateFile));
    if (!source)
      return source.takeError();
    Expected<std::unique_ptr<ChatTemplate>> parsed =
        ChatTemplate::parse(*source, dir + "/" + t.chatTemplateFile);
    if (!parsed)
      return parsed.takeError();
    model.chatTemplate = parsed.take();
  }
  // The manifest's ids must name tokens: a bos id past the vocabulary
  // would be a prompt the model rejects.
  if (model.bosId && *model.bosId >= model.tokenizer->vocabSize())
    return Error(dir + "/manifest.json: text.bos_token_id " +
                 std::to_string(*model.bosId) + " is outside the tokenizer's " +
                 std::to_string(model.tokenizer->vocabSize()) + " tokens");
  return Expected<TextModel>(std::move(model));
}

Expected<TextModel> xfmr::rt::loadTextModel(const Artifact &artifact) {
  return loadTextModel(artifact.directory(), artifact.manifest());
}

std::vector<int64_t> xfmr::rt::encodePrompt(const TextModel &model,
                                            std::string_view text) {
  if (!model.addBosToken && !model.addEosToken)
    return model.tokenizer->encode(text, /*addSpecialTokens=*/true);
  // transformers replaces the post-processor by [bos] $A [eos] when either
  // is stated (TokenizersBackend.update_post_processor).
  std::vector<int64_t> ids =
      model.tokenizer->encode(text, /*addSpecialTokens=*/false);
  if (model.addBosToken.value_or(false) && model.bosId)
    ids.insert(ids.begin(), *model.bosId);
  if (model.addEosToken.value_or(false)) {
    std::optional<int64_t> eos =
        model.eosToken.empty() ? std::nullopt
                               : model.tokenizer->tokenToId(model.eosToken);
    if (eos)
      ids.push_back(*eos);
  }
  return ids;
}

Expected<std::string> xfmr::rt::renderChat(const TextModel &model,
                                           const json &messages,
                                           bool addGenerationPrompt) {
  if (!model.chatTemplate)
    return Error(model.name + " has no chat template (the model folder has no "
                              "chat_template.jinja, chat_template.json or "
                              "tokenizer_config.json \"chat_template\")");
  json context = json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = addGenerationPrompt;
  // apply_chat_template passes the special tokens that are set.
  if (!model.bosToken.empty())
    context["bos_token"] = model.bosToken;
  if (!model.eosToken.empty())
    context["eos_token"] = model.eosToken;
  return model.chatTemplate->render(context);
}

Expected<std::vector<int64_t>> xfmr::rt::encodeChat(const TextModel &model,
                                                    const json &messages,
                                                    bool addGenerationPrompt) {
  Expected<std::string> text = renderChat(model, messages, addGenerationPrompt);
  if (!text)
    return text.takeError();
  return model.tokenizer->encode(*text, /*addSpecialTokens=*/false);
}

std::string xfmr::rt::decodeText(const TextModel &model,
                                 const std::vector<int64_t> &ids) {
  return model.tokenizer->decode(ids, /*skipSpecialTokens=*/true);
}

SamplingParams xfmr::rt::applyGenerationDefaults(const GenerationDefaults &d,
                                                 SamplingParams base) {
  if (d.repetitionPenalty)
    base.repetitionPenalty = *d.repetitionPenalty;
  if (!d.doSample.value_or(false)) {
    base.temperature = 0; // greedy, whatever else the config says
    return base;
  }
  base.temperature = d.temperature.value_or(1.0);
  base.topK = d.topK.value_or(50);
  if (d.topP)
    base.topP = *d.topP;
  return base;
}
