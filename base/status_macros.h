// Status propagation macros that Debian 12's Abseil (20220623) does not ship yet.
#pragma once

#include "absl/status/status.h"    // IWYU pragma: export
#include "absl/status/statusor.h"  // IWYU pragma: export

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
//
//   KPROF_RETURN_IF_ERROR(ValidateShape(shape));
#define KPROF_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status kprof_status_ = (expr);         \
    if (!kprof_status_.ok()) return kprof_status_; \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, else moves the value
// into `lhs`, which may be a declaration. It expands to several statements: brace it under an
// `if`.
//
//   KPROF_ASSIGN_OR_RETURN(Report report, ReportFromJson(text));
#define KPROF_ASSIGN_OR_RETURN(lhs, rexpr) \
  KPROF_ASSIGN_OR_RETURN_IMPL_(KPROF_STATUS_CONCAT_(kprof_statusor_, __LINE__), lhs, rexpr)

#define KPROF_STATUS_CONCAT_INNER_(a, b) a##b
#define KPROF_STATUS_CONCAT_(a, b) KPROF_STATUS_CONCAT_INNER_(a, b)
#define KPROF_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
