//===- Api.h - xfmr-serve's HTTP endpoints ----------------------*- C++ -*-===//
//
// Part of xfmr.
//
// Routes requests to OpenAI's /v1/completions, /v1/chat/completions and
// /v1/models, and to /health, /metrics, /tokenize and /detokenize (vLLM's).
// Runs on the I/O threads: it parses, renders chat templates and tokenizes
// (fast, never a step), then hands a Job to the EngineLoop.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_SERVE_API_H
#define XFMR_SERVE_API_H

#include "EngineLoop.h"
#include "HttpServer.h"
#include "Metrics.h"

#include "xfmr/runtime/TextInterface.h"

#include <atomic>
#include <memory>
#include <string>

namespace xfmr::serve {

struct ApiOptions {
  std::string modelName;
  /// Prompt plus generated tokens of one request at most.
  int64_t maxModelLen = 0;
  int64_t vocabSize = 0;
  int64_t created = 0;   ///< for /v1/models
  uint64_t seedBase = 0; ///< seeds of requests that give none
};

class Api {
public:
  Api(const rt::TextModel &text, EngineLoop &loop, Metrics &metrics,
      ApiOptions options)
      : text(text), loop(loop), metrics(metrics), options(std::move(options)) {}

  /// The HttpServer handler.
  void handle(HttpRequest request, std::shared_ptr<Response> response);

private:
  void generate(const HttpRequest &request, Endpoint endpoint,
                const std::shared_ptr<Response> &response);
  /// The prompt's ids: the rendered chat or the completion prompt.
  std::optional<ApiError> promptIds(const GenerationRequest &g,
                                    std::vector<int64_t> &ids) const;
  std::optional<ApiError> makeJob(const GenerationRequest &g,
                                  const HttpRequest &request, Job &job);
  void models(const std::shared_ptr<Response> &response) const;
  void tokenize(const HttpRequest &request,
                const std::shared_ptr<Response> &response) const;
  void detokenize(const HttpRequest &request,
                  const std::shared_ptr<Response> &response) const;
  void fail(const std::shared_ptr<Response> &response,
            const ApiError &error) const;

  const rt::TextModel &text;
  EngineLoop &loop;
  Metrics &metrics;
  ApiOptions options;
  std::atomic<uint64_t> unseeded{0};
};

} // namespace xfmr::serve

#endif // XFMR_SERVE_API_H
