// Bearer tokens for gRPC's server reflection, which is gRPC's own service and so never passes
// through ProfilerService's checks: a server interceptor on its methods answers a call
// without a known token UNAUTHENTICATED and lets nothing of the service through.
#pragma once

#include <memory>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "server/token_auth.h"

namespace kprof::server {

// Interceptor factories for ServerBuilder::experimental().SetInterceptorCreators: none when
// `auth` is null (no tokens: loopback, or client certificates checked by TLS itself).
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ReflectionAuthInterceptors(const TokenAuth* auth);

}  // namespace kprof::server
