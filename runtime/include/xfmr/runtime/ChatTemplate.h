//===- ChatTemplate.h - chat templates as transformers renders -*- C++ -*-====//
//
// Part of xfmr.
//
// A chat template is the Jinja2 source a model folder ships in
// tokenizer_config.json ("chat_template") or chat_template.jinja. This is an
// interpreter for the part of Jinja2 real chat templates use, rendering as
// `transformers`' apply_chat_template does: an environment with
// trim_blocks and lstrip_blocks, the loopcontrols extension, `tojson` that
// does not escape HTML, `raise_exception(msg)` and `strftime_now(fmt)` as
// globals. What the interpreter does not know is an error at parse time (or
// at render time for dynamic cases), never a wrong rendering.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_CHATTEMPLATE_H
#define XFMR_RUNTIME_CHATTEMPLATE_H

#include "xfmr/runtime/Error.h"

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace xfmr::rt {

class ChatTemplate {
public:
  /// Parses `source`; errors name `name` and the line:column.
  static Expected<std::unique_ptr<ChatTemplate>>
  parse(const std::string &source, const std::string &name);
  virtual ~ChatTemplate();

  /// Renders with `context` as the template's variables, as
  /// apply_chat_template(messages, tokenize=False, ...) passes them:
  /// {"messages": [...], "add_generation_prompt": bool, "bos_token": "...",
  ///  "eos_token": "...", "tools": [...] (optional), ...}.
  /// A `raise_exception` call, or an operation on values of the wrong kind,
  /// is an error naming the template, line and message.
  virtual Expected<std::string> render(const nlohmann::json &context) const = 0;
  /// The same with a context that keeps JSON key order: nlohmann::json sorts
  /// object keys, while Python dicts (and so `tojson` of tool definitions,
  /// or `for k, v in d.items()`) keep the order they were written in.
  virtual Expected<std::string>
  render(const nlohmann::ordered_json &context) const = 0;
};

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_CHATTEMPLATE_H
