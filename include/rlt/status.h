// Status and Result<T>: how rlt reports expected failures (bad input, capacity, I/O) without
// exceptions. Exceptions are turned into Status only at the boundaries (CLI, server).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rlt {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed or out of range
  kNotFound,            // a named file, tensor or entry does not exist
  kAlreadyExists,       // a name is defined twice
  kOutOfRange,          // an offset or index lies outside its container
  kResourceExhausted,   // not enough capacity (KV pages, memory, queue slots)
  kFailedPrecondition,  // the object is not in a state that allows the call
  kUnimplemented,       // a valid but unsupported feature (e.g. a config value rlt refuses)
  kDataLoss,            // a file is truncated or corrupt
  kIo,                  // the operating system refused (open, mmap, read)
  kInternal,            // an invariant broke: a bug in rlt
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>"
  std::string to_string() const;

  // Prefixes context ("while loading X: ") so errors read outermost-first.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Status already_exists(std::string m) {
  return {ErrorCode::kAlreadyExists, std::move(m)};
}
inline Status out_of_range(std::string m) {
  return {ErrorCode::kOutOfRange, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {ErrorCode::kResourceExhausted, std::move(m)};
}
inline Status failed_precondition(std::string m) {
  return {ErrorCode::kFailedPrecondition, std::move(m)};
}
inline Status unimplemented(std::string m) {
  return {ErrorCode::kUnimplemented, std::move(m)};
}
inline Status data_loss(std::string m) {
  return {ErrorCode::kDataLoss, std::move(m)};
}
inline Status io_error(std::string m) {
  return {ErrorCode::kIo, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {ErrorCode::kInternal, std::move(m)};
}

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(data_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace rlt

#define RLT_CONCAT_INNER(a, b) a##b
#define RLT_CONCAT(a, b) RLT_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not ok.
#define RLT_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::rlt::Status rlt_status_ = (expr);        \
    if (!rlt_status_.ok()) return rlt_status_; \
  } while (0)

// `RLT_ASSIGN_OR_RETURN(auto x, make_x());` — unwraps a Result or returns its Status.
#define RLT_ASSIGN_OR_RETURN(lhs, expr) \
  RLT_ASSIGN_OR_RETURN_IMPL(RLT_CONCAT(rlt_result_, __LINE__), lhs, expr)
#define RLT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
