// Result<T>: a value or the Status that explains why there is none.
//
// Construct from a T (success) or from a non-OK Status (failure). Accessing
// value() of a failed Result is a bug (asserts). Copyable when T is.
#pragma once

#include <cassert>
#include <optional>
#include <utility>

#include "base/status.h"

namespace ctrun {

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result built from an OK Status has no value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }

  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace ctrun

// Returns the Status from the enclosing function when `expr` is not OK.
#define CTRUN_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::ctrun::Status ctrun_status_ = (expr);      \
    if (!ctrun_status_.ok()) return ctrun_status_; \
  } while (0)
