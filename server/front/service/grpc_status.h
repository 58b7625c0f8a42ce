// The one place the daemon's absl::Status becomes grpc::Status: the codes share their numbers, and
// a status's details (MissingModule) go as its rich status (proto/status.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "proto/status.h"

namespace kprof::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(wire::ToWireCode(status.code())),
                      std::string(status.message()), wire::RichStatusBytes(status));
}

}  // namespace kprof::server
