// What the sections of kprof_bench share: the result table, timing, failing, the calls they
// make by method name, and the payloads and references more than one of them measures.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::bench {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d);

// One line of the result table.
struct Row {
  std::string section, figure, value, reference, ratio, goal;
};
// The table so far, in the order its rows were added: what --markdown writes.
extern std::vector<Row> rows;

// Adds a row and prints it at once, so a long run shows its figures as they come.
void Add(std::string section, std::string figure, std::string value, std::string reference,
         double ratio, std::string goal = "");

std::string Us(double seconds);
std::string Ms(double seconds);
std::string Met(bool met);

[[noreturn]] void Fail(const std::string& what);

template <typename T>
T Must(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Fail(absl::StrFormat("%s: %s", what, value.status().ToString()));
  return *std::move(value);
}

kprof::v1::TimeEvaluateRequest TimeRequest(const std::string& module, const std::string& function,
                                           const std::vector<std::string>& args);

// Unary calls by method name on a completion queue, the same way for every method: the
// overhead figures compare the daemon's work, not two client paths.
class RawCaller {
 public:
  explicit RawCaller(const std::string& target)
      : stub_(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())) {}

  bool Call(const std::string& method, const std::string& request) {
    grpc::ClientContext context;
    grpc::Slice slice(request);
    grpc::ByteBuffer in(&slice, 1), out;
    auto call = stub_.PrepareUnaryCall(&context, method, in, &queue_);
    call->StartCall();
    grpc::Status status;
    call->Finish(&out, &status, this);
    void* tag = nullptr;
    bool ok = false;
    queue_.Next(&tag, &ok);
    return ok && status.ok();
  }

 private:
  grpc::GenericStub stub_;
  grpc::CompletionQueue queue_;
};

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kTimeEvaluate[] = "/kprof.v1.Profiler/TimeEvaluate";

std::vector<double> TimeCalls(int n, const std::function<void()>& call);

// A 1 KiB message to another process and back over a socketpair, `kRounds` single round trips
// (seconds each): the floor of a front-to-worker round trip.
std::vector<double> ProcessPingPongs(int kRounds);

double ProcessPingPong();

// Distinct modules of `size` bytes: a real shared library with a tag of its own appended (the
// loader ignores bytes past the ELF's sections; the registry names a module by its SHA-256).
std::string Candidate(const std::string& base, size_t size, int tag);

// The output of a shell command, or a failure.
std::string Output(const std::string& command);

// What a Python script (Debian's interpreter, the script in a file of its own) printed, or a
// failure.
std::string PythonOutput(const std::string& script);

// Runs a Python script that prints how many jobs it did and the seconds they took: those two,
// or a failure.
std::pair<int, double> PythonDoneAndSeconds(const std::string& script);

// CPU seconds and wake-ups of a set of processes, so far.
struct Usage {
  double cpu = 0;
  double wakeups = 0;
  Usage& operator+=(const Usage& u) {
    cpu += u.cpu;
    wakeups += u.wakeups;
    return *this;
  }
  Usage operator-(const Usage& u) const { return {cpu - u.cpu, wakeups - u.wakeups}; }
};

// What `pid`'s threads have spent: their run time to the nanosecond (schedstat) and their
// voluntary switches. A thread that ended between two readings takes its share with it.
Usage ProcessUsage(pid_t pid);

// A job file of `n` nop jobs (number 1, repeat 1; ids j0, j1 ...) in `dir`: its path.
std::string NopJobs(const std::string& dir, int n);

}  // namespace kprof::bench
