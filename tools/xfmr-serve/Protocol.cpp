//===- Protocol.cpp - OpenAI-compatible request and response JSON ---------===//
//
// Part of xfmr.
//
// nlohmann::json is used without exceptions (the tool is built with
// -fno-exceptions, where a throw would abort): parse with allow_exceptions =
// false, look fields up with find(), check each type before get<>(), and
// dump with the replacing UTF-8 error handler.
//
//===----------------------------------------------------------------------===//

#include "Protocol.h"

#include <cmath>
#include <limits>

using json = nlohmann::json;

namespace xfmr::serve {

namespace {

constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxStopTokenIds = 64;

ApiError invalid(const std::string &param, const std::string &message) {
  ApiError e;
  e.status = 400;
  e.param = param;
  e.message = message;
  return e;
}

const char *typeName(const json &v) { return v.type_name(); }

ApiError wrongType(const std::string &param, const char *want, const json &v) {
  return invalid(param,
                 "'" + param + "' must be " + want + ", not " + typeName(v));
}

/// A JSON integer (or a float with an integral value) in [lo, hi].
std::optional<ApiError> readInt(const json &v, const std::string &param,
                                int64_t lo, int64_t hi, int64_t &out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(u) > hi || static_cast<int64_t>(u) < lo)
      return invalid(param, "'" + param + "' is " + std::to_string(u) +
                                ", outside [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
    out = static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi)
      return invalid(param, "'" + param + "' is " + std::to_string(i) +
                                ", outside [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
    out = i;
    return std::nullopt;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) &&
        d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
      out = static_cast<int64_t>(d);
      return std::nullopt;
    }
    return invalid(param, "'" + param + "' must be an integer in [" +
                              std::to_string(lo) + ", " + std::to_string(hi) +
                              "]");
  }
  return wrongType(param, "an integer", v);
}

std::optional<ApiError> readDouble(const json &v, const std::string &param,
                                   double lo, double hi, bool loOpen,
                                   double &out) {
  if (!v.is_number())
    return wrongType(param, "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (loOpen && d == lo)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "'%s' is %g, outside %c%g, %g]",
                  param.c_str(), d, loOpen ? '(' : '[', lo, hi);
    return invalid(param, buf);
  }
  out = d;
  return std::nullopt;
}

std::optional<ApiError> readBool(const json &v, const std::string &param,
                                 bool &out) {
  if (!v.is_boolean())
    return wrongType(param, "a boolean", v);
  out = v.get<bool>();
  return std::nullopt;
}

std::optional<ApiError> readTokenIds(const json &v, const std::string &param,
                                     int64_t vocab, size_t maxCount,
                                     std::vector<int64_t> &out) {
  if (!v.is_array())
    return wrongType(param, "an array of token ids", v);
  if (v.size() > maxCount)
    return invalid(param, "'" + param + "' has " + std::to_string(v.size()) +
                              " ids, at most " + std::to_string(maxCount) +
                              " are allowed");
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t id = 0;
    if (auto e = readInt(v[i], param, 0, vocab - 1, id)) {
      e->message = "'" + param + "[" + std::to_string(i) +
                   "]' must be a token id in [0, " + std::to_string(vocab) +
                   ")";
      return e;
    }
    out.push_back(id);
  }
  return std::nullopt;
}

std::optional<ApiError> readStop(const json &v, std::vector<std::string> &out) {
  if (v.is_null())
    return std::nullopt;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStopStrings)
      return invalid("stop", "'stop' has " + std::to_string(v.size()) +
                                 " strings, at most " +
                                 std::to_string(kMaxStopStrings) +
                                 " are allowed");
    for (const json &s : v) {
      if (!s.is_string())
        return wrongType("stop", "a string or an array of strings", s);
      out.push_back(s.get<std::string>());
    }
  } else {
    return wrongType("stop", "a string or an array of strings", v);
  }
  for (const std::string &s : out) {
    if (s.empty())
      return invalid("stop", "'stop' strings must not be empty");
    if (s.size() > kMaxStopBytes)
      return invalid("stop", "'stop' strings are at most " +
                                 std::to_string(kMaxStopBytes) + " bytes");
  }
  return std::nullopt;
}

/// A message's content as the template sees it: a string (a list of text
/// parts joined by newlines, as vLLM does), or null.
std::optional<ApiError> normaliseContent(json &message, size_t index) {
  std::string param = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null() || it->is_string())
    return std::nullopt;
  if (!it->is_array())
    return wrongType(param, "a string or an array of text parts", *it);
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const json &part = (*it)[k];
    auto type = part.is_object() ? part.find("type") : part.end();
    auto body = part.is_object() ? part.find("text") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string() ||
        type->get<std::string>() != "text" || body == part.end() ||
        !body->is_string())
      return invalid(
          param,
          "'" + param + "[" + std::to_string(k) +
              "]' is not a text part ({\"type\": \"text\", \"text\": ...}); "
              "only text is supported");
    if (k)
      text += "\n";
    text += body->get<std::string>();
  }
  *it = text;
  return std::nullopt;
}

std::optional<ApiError> readMessages(const json &v, json &out) {
  if (!v.is_array())
    return wrongType("messages", "an array", v);
  if (v.empty())
    return invalid("messages", "'messages' must not be empty");
  out = v;
  for (size_t i = 0; i < out.size(); ++i) {
    json &m = out[i];
    std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return wrongType(param, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return invalid(param + ".role", "'" + param + ".role' must be a string");
    if (auto e = normaliseContent(m, i))
      return e;
  }
  return std::nullopt;
}

std::optional<ApiError> readPrompt(const json &v, int64_t vocab,
                                   GenerationRequest &out) {
  if (v.is_string()) {
    out.promptText = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    out.promptText = v[0].get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && !v.empty() && v[0].is_array())
    return invalid(
        "prompt",
        "batched prompts are not supported: send one prompt per request");
  if (v.is_array() && (v.empty() || v[0].is_number())) {
    if (v.empty())
      return invalid("prompt", "'prompt' must not be empty");
    return readTokenIds(v, "prompt", vocab, std::numeric_limits<size_t>::max(),
                        out.promptIds);
  }
  if (v.is_array())
    return invalid(
        "prompt",
        "batched prompts are not supported: send one prompt per request");
  return wrongType("prompt", "a string or an array of token ids", v);
}

/// Fields that OpenAI accepts but xfmr does not implement: a request that
/// sets them to anything but their neutral value is refused, not silently
/// answered as if they were absent.
std::optional<ApiError> refuseUnsupported(const json &body) {
  static const char *const zeroOrNull[] = {"presence_penalty",
                                           "frequency_penalty"};
  for (const char *name : zeroOrNull) {
    auto it = body.find(name);
    if (it != body.end() && !it->is_null() &&
        !(it->is_number() && it->get<double>() == 0))
      return invalid(name,
                     std::string("'") + name + "' is not supported (only 0)");
  }
  static const char *const falseOrNull[] = {
      "logprobs",   "echo",   "top_logprobs",    "best_of",
      "logit_bias", "suffix", "response_format", "tool_choice_required"};
  for (const char *name : falseOrNull) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null() ||
        (it->is_boolean() && !it->get<bool>()))
      continue;
    if (std::string(name) == "best_of" && it->is_number() &&
        it->get<double>() == 1)
      continue;
    if (std::string(name) == "response_format" && it->is_object()) {
      auto type = it->find("type");
      if (type != it->end() && type->is_string() &&
          type->get<std::string>() == "text")
        continue;
    }
    if (std::string(name) == "logit_bias" && it->is_object() && it->empty())
      continue;
    return invalid(name, std::string("'") + name + "' is not supported");
  }
  return std::nullopt;
}

std::optional<ApiError> readSampling(const json &body, int64_t vocab,
                                     GenerationRequest &out) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (v.is_null())
      continue;
    std::optional<ApiError> e;
    double d = 0;
    int64_t i = 0;
    if (k == "max_tokens" || k == "max_completion_tokens") {
      if (!(e = readInt(v, k, 1, std::numeric_limits<int64_t>::max(), i)))
        out.maxTokens = i;
    } else if (k == "temperature") {
      if (!(e = readDouble(v, k, 0, 2, false, d)))
        out.temperature = d;
    } else if (k == "top_p") {
      if (!(e = readDouble(v, k, 0, 1, true, d)))
        out.topP = d;
    } else if (k == "top_k") {
      if (!(e = readInt(v, k, -1, std::numeric_limits<int32_t>::max(), i)))
        out.topK = i <= 0 ? 0 : i;
    } else if (k == "repetition_penalty") {
      if (!(e = readDouble(v, k, 0, 100, true, d)))
        out.repetitionPenalty = d;
    } else if (k == "seed") {
      if (!(e = readInt(v, k, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), i)))
        out.seed = static_cast<uint64_t>(i);
    } else if (k == "n") {
      if (!(e = readInt(v, k, 1, std::numeric_limits<int64_t>::max(), i)) &&
          i != 1)
        e = invalid(k, "'n' must be 1: one choice per request is supported");
    } else if (k == "stream") {
      e = readBool(v, k, out.stream);
    } else if (k == "stream_options") {
      if (!v.is_object())
        e = wrongType(k, "an object", v);
      else if (auto u = v.find("include_usage"); u != v.end() && !u->is_null())
        e = readBool(*u, "stream_options.include_usage", out.includeUsage);
    } else if (k == "stop") {
      e = readStop(v, out.stop);
    } else if (k == "stop_token_ids") {
      e = readTokenIds(v, k, vocab, kMaxStopTokenIds, out.stopTokenIds);
    } else if (k == "ignore_eos") {
      e = readBool(v, k, out.ignoreEos);
    } else if (k == "skip_special_tokens") {
      e = readBool(v, k, out.skipSpecialTokens);
    } else if (k == "priority") {
      if (v.is_string())
        out.priority = v.get<std::string>();
      else
        e = wrongType(k, "a string (\"interactive\" or \"batch\")", v);
    } else if (k == "model") {
      if (v.is_string())
        out.model = v.get<std::string>();
      else
        e = wrongType(k, "a string", v);
    }
    if (e)
      return e;
  }
  return std::nullopt;
}

std::optional<ApiError> readChatFields(const json &body,
                                       GenerationRequest &out) {
  auto messages = body.find("messages");
  if (messages == body.end())
    return invalid("messages", "'messages' is required");
  if (auto e = readMessages(*messages, out.messages))
    return e;
  if (auto it = body.find("add_generation_prompt");
      it != body.end() && !it->is_null())
    if (auto e =
            readBool(*it, "add_generation_prompt", out.addGenerationPrompt))
      return e;
  if (auto it = body.find("chat_template_kwargs");
      it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return wrongType("chat_template_kwargs", "an object", *it);
    out.chatTemplateKwargs = *it;
  }
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array())
      return wrongType("tools", "an array", *it);
    out.tools = *it;
  }
  return std::nullopt;
}

} // namespace

std::string dumpJson(const json &value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string errorBody(const ApiError &error) {
  json e = {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return dumpJson(json{{"error", std::move(e)}});
}

std::optional<ApiError> parseGenerationRequest(const std::string &body,
                                               Endpoint endpoint,
                                               int64_t vocabSize,
                                               GenerationRequest &out) {
  out = GenerationRequest();
  out.endpoint = endpoint;
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return invalid("", "the request body is not valid JSON");
  if (!parsed.is_object())
    return invalid("",
                   std::string("the request body must be a JSON object, not ") +
                       typeName(parsed));
  if (auto e = refuseUnsupported(parsed))
    return e;
  if (auto e = readSampling(parsed, vocabSize, out))
    return e;
  if (endpoint == Endpoint::ChatCompletions)
    return readChatFields(parsed, out);
  auto prompt = parsed.find("prompt");
  if (prompt == parsed.end() || prompt->is_null())
    return invalid("prompt", "'prompt' is required");
  return readPrompt(*prompt, vocabSize, out);
}

std::string sseEvent(const json &value) {
  return "data: " + dumpJson(value) + "\n\n";
}

json usageJson(int64_t promptTokens, int64_t completionTokens,
               int64_t cachedTokens) {
  return {{"prompt_tokens", promptTokens},
          {"completion_tokens", completionTokens},
          {"total_tokens", promptTokens + completionTokens},
          {"prompt_tokens_details", {{"cached_tokens", cachedTokens}}}};
}

namespace {

json headerJson(Endpoint endpoint, const ResponseHeader &h, bool chunk) {
  const char *object =
      endpoint == Endpoint::Completions
          ? "text_completion"
          : (chunk ? "chat.completion.chunk" : "chat.completion");
  return {{"id", h.id},
          {"object", object},
          {"created", h.created},
          {"model", h.model}};
}

json reasonJson(const char *finishReason) {
  return finishReason ? json(finishReason) : json(nullptr);
}

} // namespace

json completionResponse(Endpoint endpoint, const ResponseHeader &header,
                        const std::string &text, const char *finishReason,
                        const json &usage) {
  json r = headerJson(endpoint, header, false);
  json choice = {{"index", 0},
                 {"logprobs", nullptr},
                 {"finish_reason", reasonJson(finishReason)}};
  if (endpoint == Endpoint::Completions)
    choice["text"] = text;
  else
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  r["choices"] = json::array({std::move(choice)});
  r["usage"] = usage;
  return r;
}

json streamChunk(Endpoint endpoint, const ResponseHeader &header,
                 const std::string &text, const char *finishReason, bool role) {
  json r = headerJson(endpoint, header, true);
  json choice = {{"index", 0},
                 {"logprobs", nullptr},
                 {"finish_reason", reasonJson(finishReason)}};
  if (endpoint == Endpoint::Completions) {
    choice["text"] = text;
  } else {
    json delta = json::object();
    if (role)
      delta["role"] = "assistant";
    if (role || !text.empty())
      delta["content"] = text;
    choice["delta"] = std::move(delta);
  }
  r["choices"] = json::array({std::move(choice)});
  return r;
}

json usageChunk(Endpoint endpoint, const ResponseHeader &header,
                const json &usage) {
  json r = headerJson(endpoint, header, true);
  r["choices"] = json::array();
  r["usage"] = usage;
  return r;
}

} // namespace xfmr::serve
