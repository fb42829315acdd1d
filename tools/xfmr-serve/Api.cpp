//===- Api.cpp - xfmr-serve's HTTP endpoints ------------------------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "Api.h"

#include "xfmr/runtime/Text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace xfmr::serve {

using namespace xfmr::rt;
using json = nlohmann::json;

namespace {

ApiError badRequest(const std::string &message, const std::string &param = "") {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The completion defaults a model folder's generation_config.json gives
/// (vLLM's --generation-config auto), under the request's own fields.
SamplingParams samplingFor(const GenerationRequest &g,
                           const GenerationDefaults &d) {
  SamplingParams p;
  p.temperature = g.temperature.value_or(d.temperature.value_or(1.0));
  p.topP = g.topP.value_or(d.topP.value_or(1.0));
  p.topK = g.topK.value_or(d.topK.value_or(0));
  p.repetitionPenalty =
      g.repetitionPenalty.value_or(d.repetitionPenalty.value_or(1.0));
  return p;
}

} // namespace

void Api::fail(const std::shared_ptr<Response> &response,
               const ApiError &error) const {
  response->respond(error.status, "application/json", errorBody(error));
}

void Api::handle(HttpRequest request, std::shared_ptr<Response> response) {
  const std::string &path = request.target;
  bool post = request.method == "POST", get = request.method == "GET";
  auto methodNotAllowed = [&](const char *allow) {
    ApiError e;
    e.status = 405;
    e.message = "method " + request.method + " is not allowed on " + path +
                " (use " + allow + ")";
    response->respond(405, "application/json", errorBody(e),
                      {{"Allow", allow}});
  };
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post)
      return methodNotAllowed("POST");
    return generate(request,
                    path == "/v1/completions" ? Endpoint::Completions
                                              : Endpoint::ChatCompletions,
                    response);
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!post)
      return methodNotAllowed("POST");
    return path == "/tokenize" ? tokenize(request, response)
                               : detokenize(request, response);
  }
  if (path == "/health" || path == "/metrics" || path == "/v1/models") {
    if (!get)
      return methodNotAllowed("GET");
    if (path == "/v1/models")
      return models(response);
    if (path == "/metrics")
      return response->respond(200, "text/plain; version=0.0.4; charset=utf-8",
                               metrics.render());
    if (loop.draining()) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = "the server is shutting down";
      return fail(response, e);
    }
    return response->respond(200, "application/json", "{}");
  }
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.message = "no route " + request.method + " " + path;
  fail(response, e);
}

void Api::models(const std::shared_ptr<Response> &response) const {
  json model = {
      {"id", options.modelName},    {"object", "model"},
      {"created", options.created}, {"owned_by", "xfmr"},
      {"root", options.modelName},  {"max_model_len", options.maxModelLen}};
  response->respond(
      200, "application/json",
      dumpJson(json{{"object", "list"}, {"data", json::array({model})}}));
}

std::optional<ApiError> Api::promptIds(const GenerationRequest &g,
                                       std::vector<int64_t> &ids) const {
  if (g.endpoint == Endpoint::Completions) {
    ids = g.promptText ? encodePrompt(text, *g.promptText) : g.promptIds;
  } else {
    if (!text.chatTemplate)
      return badRequest(
          text.name + " has no chat template: use /v1/completions", "messages");
    json context = g.chatTemplateKwargs.is_object() ? g.chatTemplateKwargs
                                                    : json::object();
    context["messages"] = g.messages;
    context["add_generation_prompt"] = g.addGenerationPrompt;
    if (!text.bosToken.empty())
      context["bos_token"] = text.bosToken;
    if (!text.eosToken.empty())
      context["eos_token"] = text.eosToken;
    if (g.tools.is_array())
      context["tools"] = g.tools;
    Expected<std::string> rendered = text.chatTemplate->render(context);
    if (!rendered)
      return badRequest("the chat template failed: " + rendered.error(),
                        "messages");
    ids = text.tokenizer->encode(*rendered, /*addSpecialTokens=*/false);
  }
  if (ids.empty())
    return badRequest("the prompt is empty after tokenization", "prompt");
  return std::nullopt;
}

std::optional<ApiError> Api::makeJob(const GenerationRequest &g,
                                     const HttpRequest &request, Job &job) {
  if (!g.model.empty() && g.model != options.modelName) {
    ApiError e;
    e.status = 404;
    e.type = "not_found_error";
    e.code = "model_not_found";
    e.param = "model";
    e.message = "The model `" + g.model +
                "` does not exist (this server serves `" + options.modelName +
                "`)";
    return e;
  }
  std::string poolName = g.priority;
  if (poolName.empty())
    poolName = lower(request.header("x-priority"));
  std::optional<size_t> pool = loop.poolFor(poolName);
  if (!pool)
    return badRequest("unknown priority or pool '" + poolName + "'",
                      "priority");
  if (auto e = promptIds(g, job.prompt))
    return e;
  int64_t promptLength = static_cast<int64_t>(job.prompt.size());
  if (promptLength >= options.maxModelLen)
    return badRequest(
        formatString(
            "This model's maximum context length is %lld tokens. However, "
            "your prompt has %lld tokens.",
            static_cast<long long>(options.maxModelLen),
            static_cast<long long>(promptLength)),
        g.endpoint == Endpoint::Completions ? "prompt" : "messages");
  int64_t room = options.maxModelLen - promptLength;
  int64_t maxTokens =
      g.maxTokens.value_or(g.endpoint == Endpoint::Completions ? 16 : room);
  if (maxTokens > room)
    return badRequest(
        formatString(
            "This model's maximum context length is %lld tokens. However, you "
            "requested %lld tokens (%lld in the prompt, %lld for the "
            "completion). "
            "Please reduce the length of the prompt or completion.",
            static_cast<long long>(options.maxModelLen),
            static_cast<long long>(promptLength) +
                std::min<int64_t>(maxTokens, INT64_MAX - promptLength),
            static_cast<long long>(promptLength),
            static_cast<long long>(maxTokens)),
        "max_tokens");
  job.endpoint = g.endpoint;
  job.pool = *pool;
  job.cls =
      poolName == "batch" ? RequestClass::Batch : RequestClass::Interactive;
  job.sampling = samplingFor(g, text.defaults);
  job.sampling.maxTokens = maxTokens;
  job.sampling.seed = g.seed ? *g.seed : options.seedBase + unseeded++;
  // An eos id the model cannot produce (a tokenizer larger than the
  // logits) never stops anything; left in, every request would be refused.
  if (!g.ignoreEos)
    for (int64_t id : text.eosIds)
      if (id < options.vocabSize)
        job.sampling.stopTokens.push_back(id);
  for (int64_t id : g.stopTokenIds)
    if (std::find(job.sampling.stopTokens.begin(),
                  job.sampling.stopTokens.end(),
                  id) == job.sampling.stopTokens.end())
      job.sampling.stopTokens.push_back(id);
  if (Status s = validate(job.sampling, options.vocabSize); !s)
    return badRequest(s.error());
  job.stop = g.stop;
  job.skipSpecialTokens = g.skipSpecialTokens;
  job.stream = g.stream;
  job.includeUsage = g.includeUsage;
  job.header.id = g.endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-";
  job.header.created = static_cast<int64_t>(std::time(nullptr));
  job.header.model = options.modelName;
  job.arrival = loop.now();
  return std::nullopt;
}

void Api::generate(const HttpRequest &request, Endpoint endpoint,
                   const std::shared_ptr<Response> &response) {
  GenerationRequest g;
  if (auto e =
          parseGenerationRequest(request.body, endpoint, options.vocabSize, g))
    return fail(response, *e);
  Job job;
  if (auto e = makeJob(g, request, job))
    return fail(response, *e);
  job.response = response;
  if (auto e = loop.submit(std::move(job)))
    return fail(response, *e);
}

void Api::tokenize(const HttpRequest &request,
                   const std::shared_ptr<Response> &response) const {
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return fail(response, badRequest("the request body must be a JSON object"));
  bool chat = body.contains("messages");
  bool addSpecial = !chat;
  if (auto it = body.find("add_special_tokens");
      it != body.end() && !it->is_null()) {
    if (!it->is_boolean())
      return fail(response, badRequest("'add_special_tokens' must be a boolean",
                                       "add_special_tokens"));
    addSpecial = it->get<bool>();
  }
  std::vector<int64_t> ids;
  if (chat) {
    GenerationRequest g;
    if (auto e = parseGenerationRequest(request.body, Endpoint::ChatCompletions,
                                        options.vocabSize, g))
      return fail(response, *e);
    if (auto e = promptIds(g, ids))
      return fail(response, *e);
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end() || !prompt->is_string())
      return fail(response,
                  badRequest("'prompt' (a string) or 'messages' is required",
                             "prompt"));
    ids = addSpecial
              ? encodePrompt(text, prompt->get<std::string>())
              : text.tokenizer->encode(prompt->get<std::string>(), false);
  }
  json out = {{"count", ids.size()},
              {"max_model_len", options.maxModelLen},
              {"tokens", ids}};
  if (auto it = body.find("return_token_strs");
      it != body.end() && it->is_boolean() && it->get<bool>()) {
    json strs = json::array();
    for (int64_t id : ids)
      strs.push_back(text.tokenizer->idToToken(id));
    out["token_strs"] = std::move(strs);
  }
  response->respond(200, "application/json", dumpJson(out));
}

void Api::detokenize(const HttpRequest &request,
                     const std::shared_ptr<Response> &response) const {
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return fail(response, badRequest("the request body must be a JSON object"));
  auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array())
    return fail(
        response,
        badRequest("'tokens' (an array of token ids) is required", "tokens"));
  std::vector<int64_t> ids;
  for (const json &t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= options.vocabSize)
      return fail(
          response,
          badRequest(formatString("'tokens' must hold token ids in [0, %lld)",
                                  static_cast<long long>(options.vocabSize)),
                     "tokens"));
    ids.push_back(t.get<int64_t>());
  }
  response->respond(
      200, "application/json",
      dumpJson(json{{"prompt", text.tokenizer->decode(ids, true)}}));
}

} // namespace xfmr::serve
