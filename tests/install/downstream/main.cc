// Times builtin spin_us on the kprofd at argv[1] through the installed client library.
#include <cstdio>

#include "client/kprof_client.h"
#include "kprof/module_abi.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto client = kprof::client::Client::Connect(argv[1]);
  if (!client.ok()) return 1;
  kprof::v1::TimeEvaluateRequest request;
  request.mutable_call()->set_module_id("builtin");
  request.mutable_call()->set_function("spin_us");
  request.mutable_call()->add_args("float64:20");
  request.set_repeat(2);
  auto result = (*client)->TimeEvaluate(request);
  if (!result.ok()) {
    std::fprintf(stderr, "downstream: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("downstream: %d repeats, median %.1f us (ABI %d)\n", result->seconds_per_call_size(),
              result->statistics().median() * 1e6, KPROF_MODULE_ABI_VERSION);
  return result->seconds_per_call_size() == 2 ? 0 : 1;
}
