//===- ChatTemplate.cpp - Jinja chat templates as transformers renders ----===//
//
// Part of xfmr.
//
// The API over the interpreter in lib/jinja: parse once, render many times,
// errors as values. Context values come from JSON documents; an
// nlohmann::ordered_json context keeps its key order, which `tojson` and
// `for k, v in d.items()` print as Python's dicts do.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/ChatTemplate.h"

#include "jinja/Jinja.h"

#include <nlohmann/json.hpp>

namespace xfmr::rt {

ChatTemplate::~ChatTemplate() = default;

namespace {

using namespace jinja;

/// Deeper contexts are refused: conversion, printing and tojson recurse.
constexpr int kMaxContextDepth = 256;

/// A JSON document as the Python value json.loads would give.
template <typename Json> Value toValue(const Json &j, int depth = 0) {
  if (depth > kMaxContextDepth)
    fail("the context nests deeper than " + std::to_string(kMaxContextDepth) +
         " levels");
  switch (j.type()) {
  case nlohmann::json::value_t::null:
  case nlohmann::json::value_t::discarded:
    return Value::none();
  case nlohmann::json::value_t::boolean:
    return Value::fromBool(j.template get<bool>());
  case nlohmann::json::value_t::number_integer:
    return Value::fromInt(j.template get<int64_t>());
  case nlohmann::json::value_t::number_unsigned:
    return Value::fromInt(static_cast<int64_t>(j.template get<uint64_t>()));
  case nlohmann::json::value_t::number_float:
    return Value::fromFloat(j.template get<double>());
  case nlohmann::json::value_t::string:
    return Value::fromString(j.template get<std::string>());
  case nlohmann::json::value_t::array: {
    ValueList items;
    for (const auto &item : j)
      items.push_back(toValue(item, depth + 1));
    return Value::fromList(std::move(items));
  }
  case nlohmann::json::value_t::object: {
    Dict dict;
    for (auto it = j.begin(); it != j.end(); ++it)
      dict.emplace_back(it.key(), toValue(it.value(), depth + 1));
    return Value::fromDict(std::move(dict));
  }
  case nlohmann::json::value_t::binary:
    break;
  }
  return Value::fromString("<bytes>");
}

std::string describe(const std::string &name, const Failure &f) {
  if (f.loc.line == 0)
    return name + ": " + f.message;
  return name + ":" + std::to_string(f.loc.line) + ":" +
         std::to_string(f.loc.column) + ": " + f.message;
}

class JinjaChatTemplate final : public ChatTemplate {
public:
  JinjaChatTemplate(std::string name, Body body)
      : name(std::move(name)), body(std::move(body)) {}

  Expected<std::string> render(const nlohmann::json &context) const override {
    return renderJson(context);
  }
  Expected<std::string>
  render(const nlohmann::ordered_json &context) const override {
    return renderJson(context);
  }

private:
  std::string name;
  Body body;

  template <typename Json>
  Expected<std::string> renderJson(const Json &json) const {
    if (!json.is_object())
      return Error(name + ": the render context must be a JSON object");
    try {
      Value context = toValue(json);
      return jinja::render(body, *context.dict);
    } catch (const Failure &f) {
      return Error(describe(name, f));
    }
  }
};

} // namespace

Expected<std::unique_ptr<ChatTemplate>>
ChatTemplate::parse(const std::string &source, const std::string &name) {
  try {
    Body body = parseTemplate(tokenize(source));
    return std::unique_ptr<ChatTemplate>(
        std::make_unique<JinjaChatTemplate>(name, std::move(body)));
  } catch (const Failure &f) {
    return Error(describe(name, f));
  }
}

} // namespace xfmr::rt
