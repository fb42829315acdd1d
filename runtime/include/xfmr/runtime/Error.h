//===- Error.h - value-or-message results of the runtime --------*- C++ -*-===//
//
// Part of xfmr.
//
// The runtime reports bad input (a malformed .npy, a truncated .pb) as a
// value, never as an exception: its users are built with -fno-exceptions.
// An Expected<T> holds either a T or an Error whose message names the file
// or tensor and says why.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RUNTIME_ERROR_H
#define XFMR_RUNTIME_ERROR_H

#include <string>
#include <utility>
#include <variant>

namespace xfmr::rt {

/// A failure with one human-readable message.
class Error {
public:
  explicit Error(std::string message) : msg(std::move(message)) {}
  const std::string &message() const { return msg; }

private:
  std::string msg;
};

namespace detail {
/// Prints `what` and the error message, then aborts: reading the value of a
/// failed Expected is a bug in the caller, not bad input.
[[noreturn]] void reportBadExpectedAccess(const char *what,
                                          const std::string &message);
} // namespace detail

/// Either a T or an Error. Test with `if (!result)` before dereferencing.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : storage(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : storage(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return storage.index() == 0; }
  explicit operator bool() const { return ok(); }

  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  T &value() & {
    if (!ok())
      detail::reportBadExpectedAccess("value of a failed Expected", error());
    return *std::get_if<0>(&storage);
  }
  const T &value() const & {
    if (!ok())
      detail::reportBadExpectedAccess("value of a failed Expected", error());
    return *std::get_if<0>(&storage);
  }
  /// Moves the value out.
  T take() { return std::move(value()); }

  /// The message of a failed result; empty for a successful one.
  const std::string &error() const {
    static const std::string none;
    return ok() ? none : std::get_if<1>(&storage)->message();
  }
  /// The error of a failed result, to pass it on as another Expected.
  Error takeError() {
    if (ok())
      detail::reportBadExpectedAccess("error of a successful Expected", "");
    return std::move(*std::get_if<1>(&storage));
  }

private:
  std::variant<T, Error> storage;
};

/// Success or an Error, for operations without a value.
template <> class [[nodiscard]] Expected<void> {
public:
  Expected() = default;
  Expected(Error error) : err(error.message()), failed(true) {}

  bool ok() const { return !failed; }
  explicit operator bool() const { return ok(); }
  const std::string &error() const { return err; }
  Error takeError() {
    if (ok())
      detail::reportBadExpectedAccess("error of a successful Expected", "");
    return Error(std::move(err));
  }

private:
  std::string err;
  bool failed = false;
};

using Status = Expected<void>;

} // namespace xfmr::rt

#endif // XFMR_RUNTIME_ERROR_H
