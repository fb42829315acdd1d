//===- Text.h - formatting and parsing of messages and options --*- C++ -*-===//
//
// Part of xfmr. printf-style formatting into a std::string (decision traces,
// error messages) and strict number parsing for the tools' options.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_TEXT_H
#define XFMR_RUNTIME_TEXT_H

#include <cstdint>
#include <string>

namespace xfmr::rt {

/// printf into a string (truncated at 511 characters).
std::string formatString(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// A whole decimal integer in [lo, hi]; false for anything else (empty,
/// trailing characters, out of range).
bool parseInt(const std::string &text, int64_t lo, int64_t hi, int64_t &out);

/// A whole finite decimal number; false for anything else.
bool parseDouble(const std::string &text, double &out);

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_TEXT_H
