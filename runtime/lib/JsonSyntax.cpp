//===- JsonSyntax.cpp - the message of a JSON syntax error ----------------===//
//
// Part of xfmr.
//
//===----------------------------------------------------------------------===//

#include "xfmr/runtime/JsonSyntax.h"

#include <nlohmann/json.hpp>

using json = nlohmann::json;

namespace {

/// Keeps the first parse error's message; accepts everything else.
class SyntaxErrorCollector : public nlohmann::json_sax<json> {
public:
  std::string message;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &ex) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 2:
    // ..." without the bracketed id.
    message = ex.what();
    size_t close = message.find("] ");
    if (!message.empty() && message[0] == '[' && close != std::string::npos)
      message.erase(0, close + 2);
    return false;
  }
};

} // namespace

std::string xfmr::rt::jsonSyntaxError(std::string_view text) {
  SyntaxErrorCollector collector;
  json::sax_parse(text.begin(), text.end(), &collector,
                  nlohmann::detail::input_format_t::json, /*strict=*/true);
  return collector.message;
}
