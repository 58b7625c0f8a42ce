// Server interceptors, for what gRPC decides before ProfilerService sees a call:
// - bearer tokens for gRPC's server reflection, which is gRPC's own service and so never passes
//   through ProfilerService's checks: a call without a known token is answered
//   UNAUTHENTICATED and nothing of the service gets through;
// - a unary request that is not valid protobuf, which grpc++ answers UNIMPLEMENTED with no
//   message, as if the method did not exist: INVALID_ARGUMENT, saying what was wrong.
#pragma once

#include <memory>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "server/front/service/token_auth.h"

namespace kprof::server {

// Interceptor factories for ServerBuilder::experimental().SetInterceptorCreators. Reflection's
// is left out when `auth` is null (no tokens: loopback, or client certificates checked by TLS
// itself).
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ServerInterceptors(const TokenAuth* auth);

}  // namespace kprof::server
