//===- TextInterface.h - an artifact's tokenizer, chat template -*- C++ -*-===//
//
// Part of xfmr.
//
// The text side of an artifact (the manifest's "text", docs/artifact.md):
// its tokenizer, chat template, special tokens and generation defaults,
// loaded from the artifact's own files (each checked against the size and
// SHA-256 the manifest records, on the bytes that are then parsed). Prompts
// are encoded as transformers encodes them: tokenizer(text) for plain text,
// apply_chat_template(messages, tokenize=True) for chats (the rendered text
// encoded without adding special tokens again). `xfmr-run generate
// --prompt/--chat` and the HTTP server use this unit.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_TEXTINTERFACE_H
#define XFMR_RUNTIME_TEXTINTERFACE_H

#include "xfmr/runtime/ChatTemplate.h"
#include "xfmr/runtime/Error.h"
#include "xfmr/runtime/Manifest.h"
#include "xfmr/runtime/Sampling.h"
#include "xfmr/runtime/Tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace xfmr::rt {

class Artifact;

/// An artifact's text interface, ready to encode and decode. Immutable
/// after load; safe to share between threads (Tokenizer.h, ChatTemplate.h).
struct TextModel {
  std::unique_ptr<Tokenizer> tokenizer;
  /// Null when the artifact has no chat template.
  std::unique_ptr<ChatTemplate> chatTemplate;
  /// "" when the model folder states none.
  std::string bosToken, eosToken;
  std::optional<int64_t> bosId;
  /// The ids that end a sequence (the manifest's text.eos_token_ids).
  std::vector<int64_t> eosIds;
  /// tokenizer_config.json's add_bos_token / add_eos_token, when stated.
  std::optional<bool> addBosToken, addEosToken;
  GenerationDefaults defaults;
  /// The artifact directory, for messages.
  std::string name;
};

/// Loads the text interface of `artifact`. Fails, naming the file, when the
/// artifact has none ("DIR has no tokenizer (compile from a model folder
/// with tokenizer.json or pass --tokenizer)"), when a file is missing, a
/// symbolic link or not the size and SHA-256 the manifest records, or when
/// the tokenizer or the template does not load.
Expected<TextModel> loadTextModel(const Artifact &artifact);
/// The same for the artifact directory `dir` whose manifest is `manifest`
/// (nothing of the model is loaded).
Expected<TextModel> loadTextModel(const std::string &dir,
                                  const Manifest &manifest);

/// The ids of a plain prompt, as transformers' tokenizer(text) gives them:
/// with add_bos_token / add_eos_token stated, [bos] text [eos] (the
/// post-processor transformers builds then); else tokenizer.json's own
/// post-processor.
std::vector<int64_t> encodePrompt(const TextModel &model,
                                  std::string_view text);

/// The chat template rendered over `messages` (an array of {"role",
/// "content"} objects) with add_generation_prompt and the bos and eos
/// tokens, as apply_chat_template(tokenize=False) renders it. Fails when the
/// artifact has no template or the template fails.
Expected<std::string> renderChat(const TextModel &model,
                                 const nlohmann::json &messages,
                                 bool addGenerationPrompt);

/// apply_chat_template(messages, tokenize=True): the rendered chat encoded
/// without adding special tokens (the template writes them).
Expected<std::vector<int64_t>> encodeChat(const TextModel &model,
                                          const nlohmann::json &messages,
                                          bool addGenerationPrompt);

/// Generated ids as text, special tokens skipped.
std::string decodeText(const TextModel &model, const std::vector<int64_t> &ids);

/// Sampling parameters from the generation defaults, as transformers'
/// generate() reads generation_config.json: greedy unless do_sample, then
/// temperature (default 1), top_k (default 50) and top_p; the repetition
/// penalty in either case. Fields the defaults do not state keep `base`'s.
SamplingParams applyGenerationDefaults(const GenerationDefaults &defaults,
                                       SamplingParams base = {});

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_TEXTINTERFACE_H
