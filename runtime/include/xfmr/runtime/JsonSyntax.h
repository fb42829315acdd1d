//===- JsonSyntax.h - the message of a JSON syntax error --------*- C++ -*-===//
//
// Part of xfmr.
//
// nlohmann::json's DOM parser without exceptions only says that text is not
// JSON; this says where and why, for the runtime's error messages
// (manifest.json, tokenizer.json).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_JSONSYNTAX_H
#define XFMR_RUNTIME_JSONSYNTAX_H

#include <string>
#include <string_view>

namespace xfmr::rt {

/// "parse error at line 1, column 2: ..." for text that is not JSON, ""
/// for text that is.
std::string jsonSyntaxError(std::string_view text);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_JSONSYNTAX_H
