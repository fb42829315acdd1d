//===- Protocol.h - OpenAI-compatible request and response JSON -*- C++ -*-===//
//
// Part of xfmr.
//
// The wire format of xfmr-serve: requests of /v1/completions and
// /v1/chat/completions parsed and checked into a GenerationRequest, and the
// JSON of responses, stream chunks and errors, shaped as OpenAI's API (and
// vLLM's extensions where OpenAI has no field: top_k, stop_token_ids,
// ignore_eos, repetition_penalty, skip_special_tokens, priority).
//
// Parsing never throws and never aborts: every field is type-checked, and a
// bad request becomes one ApiError naming the field (OpenAI's "param").
// Unknown fields are ignored, as OpenAI and vLLM do.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SERVE_PROTOCOL_H
#define XFMR_SERVE_PROTOCOL_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::serve {

/// An error in OpenAI's shape: HTTP status, message, type and param.
struct ApiError {
  int status = 400;
  std::string message;
  /// "invalid_request_error", "not_found_error", "server_error", ...
  std::string type = "invalid_request_error";
  std::string param; ///< the offending field ("" for none)
  std::string code;  ///< optional machine code ("" for null)
};

/// {"error": {"message", "type", "param", "code"}}.
std::string errorBody(const ApiError &error);

enum class Endpoint { Completions, ChatCompletions };

/// One generation request, checked and with defaults not yet applied where
/// the model's own defaults may fill them (std::nullopt).
struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;
  /// Completions: the prompt as text, or as token ids.
  std::optional<std::string> promptText;
  std::vector<int64_t> promptIds;
  /// Chat: the messages array, each {"role": string, "content": string or
  /// [{"type": "text", "text": ...}]}, content normalised to a string.
  nlohmann::json messages;
  bool addGenerationPrompt = true;
  nlohmann::json chatTemplateKwargs; ///< object or null
  nlohmann::json tools;              ///< array or null

  bool stream = false;
  bool includeUsage = false; ///< stream_options.include_usage
  std::optional<int64_t> maxTokens;
  std::optional<double> temperature, topP, repetitionPenalty;
  std::optional<int64_t> topK;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int64_t> stopTokenIds;
  bool ignoreEos = false;
  bool skipSpecialTokens = true;
  /// "interactive" or "batch" (or a pool name), "" for the default.
  std::string priority;
};

/// Parses the body of a POST to `endpoint`. Checks JSON syntax, types and
/// ranges (n == 1, 0 <= temperature <= 2, 0 < top_p <= 1, top_k >= -1,
/// max_tokens >= 1, at most 16 stop strings of at most 256 bytes, ...).
/// `vocabSize` bounds token ids (prompt and stop_token_ids).
std::optional<ApiError> parseGenerationRequest(const std::string &body,
                                               Endpoint endpoint,
                                               int64_t vocabSize,
                                               GenerationRequest &out);

/// Serialises `value` compactly, invalid UTF-8 replaced (never aborts).
std::string dumpJson(const nlohmann::json &value);

/// "data: <json>\n\n".
std::string sseEvent(const nlohmann::json &value);
inline const char *sseDone() { return "data: [DONE]\n\n"; }

/// What responses share: id ("cmpl-..." / "chatcmpl-..."), created, model.
struct ResponseHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
};

nlohmann::json usageJson(int64_t promptTokens, int64_t completionTokens,
                         int64_t cachedTokens);

/// A whole (non-streamed) response with one choice.
nlohmann::json completionResponse(Endpoint endpoint,
                                  const ResponseHeader &header,
                                  const std::string &text,
                                  const char *finishReason,
                                  const nlohmann::json &usage);
/// One stream chunk: `text` as the delta; `finishReason` null while going;
/// `role` adds {"role": "assistant"} to a chat delta (the first chunk).
nlohmann::json streamChunk(Endpoint endpoint, const ResponseHeader &header,
                           const std::string &text, const char *finishReason,
                           bool role);
/// The final usage chunk of a stream (choices: []).
nlohmann::json usageChunk(Endpoint endpoint, const ResponseHeader &header,
                          const nlohmann::json &usage);

} // namespace xfmr::serve

#endif // XFMR_SERVE_PROTOCOL_H
