// Whether a gRPC address ("HOST:PORT") stays on this host: literal loopback addresses
// (127.0.0.0/8, [::1]) and "localhost" only — a name like 127.example.com could resolve anywhere.
#pragma once

#include <string>

namespace kprof::base {

bool IsLoopbackAddress(const std::string& host_port);

}  // namespace kprof::base
