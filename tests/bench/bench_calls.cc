// Sections 2 to 5 of kprof_bench, the batches (4b) aside: what calls to kprofd cost against the
// same work done without it (Google Benchmark in-process, a bare health Check, a raw stream to a
// server that only reads).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "base/sha256.h"
#include "bench_sections.h"
#include "bench_support.h"
#include "client/kprof_client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "report/statistics.h"

namespace kprof::bench {

using kprof::report::Median;
using kprof::report::Percentile;

// --- 2. overhead ----------------------------------------------------------------------------

void Overhead(const std::string& target, const std::string& label) {
  RawCaller caller(target);
  kprof::v1::TimeEvaluateRequest request = TimeRequest("builtin", "nop", {});
  request.set_number(1);
  request.set_repeat(1);
  const std::string job = request.SerializeAsString();
  // Interleaved in blocks, so both see the same noise.
  std::vector<double> health, time, ping;
  for (int warm = 0; warm < 50; ++warm) caller.Call(kTimeEvaluate, job);
  for (int block = 0; block < 20; ++block) {
    const auto h = TimeCalls(100, [&] { caller.Call(kHealthCheck, ""); });
    const auto t = TimeCalls(100, [&] {
      if (!caller.Call(kTimeEvaluate, job)) Fail("TimeEvaluate of nop failed");
    });
    const auto p = ProcessPingPongs(100);
    // Whatever the last calls left spinning (a worker's busy poll) is over before the next
    // block: each block starts from a quiet machine.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    health.insert(health.end(), h.begin(), h.end());
    time.insert(time.end(), t.begin(), t.end());
    ping.insert(ping.end(), p.begin(), p.end());
  }
  const double p50 = Percentile(time, 50) / Percentile(health, 50);
  Add("overhead", "TimeEvaluate(nop) p50, " + label, Us(Percentile(time, 50)),
      "health Check " + Us(Percentile(health, 50)), p50, "<= 1.3: " + Met(p50 <= 1.3));
  Add("overhead", "TimeEvaluate(nop) p99, " + label, Us(Percentile(time, 99)),
      "health Check " + Us(Percentile(health, 99)), Percentile(time, 99) / Percentile(health, 99));
  // What no job run in another process can beat: the health check's own round trip plus one
  // to a second process and back, with nothing measured.
  const double floor = Percentile(health, 50) + Percentile(ping, 50);
  Add("overhead", "  floor: health Check + two-process ping-pong, " + label, Us(floor),
      "health Check " + Us(Percentile(health, 50)), floor / Percentile(health, 50));
}

void PythonOverhead(const std::string& target) {
  // Both calls on one channel as bytes (the same path for both, as the C++ figures take), in
  // interleaved blocks; then the client library's time_evaluate(), which also builds the
  // request and reads the answer into its result.
  const std::string script = absl::StrFormat(
      "import sys, time, statistics; sys.path.insert(0, '%s/python'); import kprof, grpc\n"
      "from kprof.v1 import kprof_pb2\n"
      "job = kprof_pb2.TimeEvaluateRequest(number=1, repeat=1)\n"
      "job.call.module_id = 'builtin'; job.call.function = 'nop'\n"
      "job = job.SerializeToString()\n"
      "channel = grpc.insecure_channel('%s')\n"
      "health = channel.unary_unary('/grpc.health.v1.Health/Check')\n"
      "time_evaluate = channel.unary_unary('/kprof.v1.Profiler/TimeEvaluate')\n"
      "client = kprof.connect('%s')\n"
      "def timed(call):\n"
      "    out = []\n"
      "    for _ in range(100):\n"
      "        start = time.perf_counter(); call(); out.append(time.perf_counter() - start)\n"
      "    return out\n"
      "h, t, c = [], [], []\n"
      "for _ in range(30): time_evaluate(job); client.time_evaluate('builtin', 'nop', number=1, "
      "repeat=1)\n"
      "for block in range(15):\n"
      "    h += timed(lambda: health(b''))\n"
      "    t += timed(lambda: time_evaluate(job))\n"
      "    c += timed(lambda: client.time_evaluate('builtin', 'nop', number=1, repeat=1))\n"
      "    time.sleep(0.005)\n"
      "print(statistics.median(h), statistics.median(t), statistics.median(c))\n",
      KPROF_BUILD_DIR, target, target);
  std::istringstream out(PythonOutput(script));
  double health = 0, time = 0, client = 0;
  out >> health >> time >> client;
  if (!(health > 0 && time > 0 && client > 0)) Fail("the Python unary calls gave no figures");
  Add("overhead", "TimeEvaluate(nop) p50 from Python, unpinned", Us(time),
      "health Check " + Us(health), time / health, "<= 1.3: " + Met(time / health <= 1.3));
  Add("overhead", "  the same through Client.time_evaluate()", Us(client),
      "health Check " + Us(health), client / health, "");
}

// --- streams to a server that only reads them -----------------------------------------------

namespace {

// Takes any client-streaming call and answers an empty message once the stream ends: the
// cheapest server a stream of the same bytes can meet. It may compute the SHA-256 of every
// message's bytes, as a server that checks what it is sent must: as they arrive, on the thread
// that reads them, or beside, on a thread of its own that the reads hand them to; or as they
// arrive, writing them to a file as well (what a server that keeps what it checks must do
// at least).
enum class SinkHash { kNone, kInline, kBeside, kInlineStored };

class Sink final : public grpc::CallbackGenericService {
 public:
  explicit Sink(SinkHash hash = SinkHash::kNone) : hash_(hash) {}

 private:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(SinkHash hash) : hash_(hash) {
        if (hash_ == SinkHash::kBeside) hasher_ = std::thread([this] { HashBeside(); });
        if (hash_ == SinkHash::kInlineStored) {
          char path[] = "/tmp/kprof-bench-sink-XXXXXX";
          file_ = mkstemp(path);
          if (file_ < 0) Fail("the storing sink cannot make its file");
          unlink(path);
        }
        StartRead(&in_);
      }
      ~Reactor() override {
        if (file_ >= 0) close(file_);
      }
      void OnReadDone(bool ok) override {
        if (ok) {
          if (hash_ == SinkHash::kInline || hash_ == SinkHash::kInlineStored) Hash(in_);
          if (hash_ == SinkHash::kBeside) {
            absl::MutexLock lock(&mutex_);
            queued_.push_back(std::move(in_));
          }
          in_.Clear();
          StartRead(&in_);
          return;
        }
        if (hasher_.joinable()) {
          {
            absl::MutexLock lock(&mutex_);
            ended_ = true;
          }
          hasher_.join();  // everything that came is hashed before the answer
        }
        grpc::Slice empty("");
        out_ = grpc::ByteBuffer(&empty, 1);
        StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      void Hash(const grpc::ByteBuffer& bytes) {
        std::vector<grpc::Slice> slices;
        if (!bytes.Dump(&slices).ok()) return;
        for (const grpc::Slice& slice : slices) {
          const std::string_view piece(reinterpret_cast<const char*>(slice.begin()), slice.size());
          sha256_.Update(piece);
          if (file_ >= 0 && write(file_, piece.data(), piece.size()) != ssize_t(piece.size())) {
            Fail("the storing sink cannot write");
          }
        }
      }
      void HashBeside() {
        while (true) {
          grpc::ByteBuffer next;
          {
            absl::MutexLock lock(&mutex_);
            mutex_.Await(absl::Condition(
                +[](Reactor* r) { return !r->queued_.empty() || r->ended_; }, this));
            if (queued_.empty()) return;
            next = std::move(queued_.front());
            queued_.pop_front();
          }
          Hash(next);
        }
      }
      const SinkHash hash_;
      kprof::base::Sha256 sha256_;
      grpc::ByteBuffer in_, out_;
      absl::Mutex mutex_;
      std::deque<grpc::ByteBuffer> queued_;
      bool ended_ = false;
      std::thread hasher_;
      int file_ = -1;
    };
    return new Reactor(hash_);
  }
  const SinkHash hash_;
};

// A client stream of `bytes` in 1 MiB chunks, as LoadModule takes them: seconds to the answer.
double StreamSeconds(kprof::v1::Profiler::Stub& stub, const std::string& bytes) {
  constexpr size_t kChunk = 1 << 20;
  const auto start = Clock::now();
  grpc::ClientContext context;
  kprof::v1::LoadModuleResponse response;
  auto writer = stub.LoadModule(&context, &response);
  kprof::v1::LoadModuleRequest header;
  header.mutable_header()->set_name("upload.so");
  header.mutable_header()->set_size_bytes(bytes.size());
  header.mutable_header()->set_sha256(kprof::base::Sha256Hex(bytes));
  writer->Write(header);
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    kprof::v1::LoadModuleRequest chunk;
    chunk.set_chunk(bytes.substr(at, kChunk));
    writer->Write(chunk);
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) Fail("upload: " + status.error_message());
  return Seconds(Clock::now() - start);
}

// A Sink on 127.0.0.1, and a Profiler stub to it.
struct SinkServer {
  explicit SinkServer(SinkHash hash = SinkHash::kNone) : sink(hash) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(&sink);
    builder.SetMaxReceiveMessageSize(16 << 20);
    server = builder.BuildAndStart();
    stub = kprof::v1::Profiler::NewStub(grpc::CreateChannel(absl::StrFormat("127.0.0.1:%d", port),
                                                            grpc::InsecureChannelCredentials()));
  }
  ~SinkServer() { server->Shutdown(std::chrono::system_clock::now()); }
  Sink sink;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<kprof::v1::Profiler::Stub> stub;
};

}  // namespace

// --- 3. per candidate -----------------------------------------------------------------------

void PerCandidate(kprof::client::Client& client, const std::string& base, double health_p50) {
  std::vector<double> seconds, loads, first_runs, second_runs;
  for (int i = 0; i < 300; ++i) {
    const std::string bytes = Candidate(base, 50 * 1024, i);
    const auto start = Clock::now();
    const auto module = Must(client.LoadModule(bytes, "candidate.so"), "candidate upload");
    const auto loaded = Clock::now();
    auto request = TimeRequest(module.id(), "vadd",
                               {"float32[256]", "float32[256]:random", "float32[256]:random"});
    Must(client.TimeEvaluate(request), "candidate TimeEvaluate");
    const auto timed = Clock::now();
    seconds.push_back(Seconds(timed - start));
    loads.push_back(Seconds(loaded - start));
    first_runs.push_back(Seconds(timed - loaded));
    // The same candidate again: the worker has it open already.
    const auto again = Clock::now();
    Must(client.TimeEvaluate(request), "candidate TimeEvaluate");
    second_runs.push_back(Seconds(Clock::now() - again));
  }
  const double p50 = Percentile(seconds, 50);
  Add("candidate", "HasModule + upload 50 KB + TimeEvaluate, p50", Ms(p50),
      "health Check " + Us(health_p50), p50 / health_p50, "< 1 ms: " + Met(p50 < 1e-3));
  SinkServer sink;
  std::vector<double> raw;
  for (int i = 0; i < 300; ++i) {
    raw.push_back(StreamSeconds(*sink.stub, Candidate(base, 50 * 1024, i)));
  }
  Add("candidate", "  of which HasModule + upload, p50", Ms(Percentile(loads, 50)),
      "raw stream of 50 KB " + Ms(Percentile(raw, 50)),
      Percentile(loads, 50) / Percentile(raw, 50));
  Add("candidate", "  of which first TimeEvaluate (loads it), p50", Ms(Percentile(first_runs, 50)),
      "TimeEvaluate again " + Ms(Percentile(second_runs, 50)),
      Percentile(first_runs, 50) / Percentile(second_runs, 50));
}

// --- 4. throughput ----------------------------------------------------------------------------

namespace {

double CallsPerSecond(const std::string& target, const std::string& method,
                      const std::string& body) {
  constexpr int kClients = 8;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      RawCaller caller(target);
      while (!stop) {
        if (caller.Call(method, body)) ++done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // connect, warm up
  const int64_t before = done;
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double rate = static_cast<double>(done - before) / Seconds(Clock::now() - start);
  stop = true;
  for (auto& t : threads) t.join();
  return rate;
}

}  // namespace

void Throughput(const std::string& target) {
  kprof::v1::TimeEvaluateRequest request = TimeRequest("builtin", "nop", {});
  const double jobs = CallsPerSecond(target, kTimeEvaluate, request.SerializeAsString());
  const double checks = CallsPerSecond(target, kHealthCheck, "");
  Add("throughput", "TimeEvaluate(nop) per second, 8 clients", absl::StrFormat("%.0f/s", jobs),
      absl::StrFormat("health checks %.0f/s", checks), jobs / checks);
}

// --- 5. upload --------------------------------------------------------------------------------

void Upload(const std::string& target, kprof::client::Client& client, const std::string& base) {
  constexpr size_t kSize = 64 << 20;
  SinkServer sink, hashing_sink(SinkHash::kInline), beside_sink(SinkHash::kBeside),
      storing_sink(SinkHash::kInlineStored);
  auto daemon =
      kprof::v1::Profiler::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  std::vector<double> to_daemon, to_sink, to_hashing_sink, to_beside_sink, to_storing_sink;
  std::string last;
  // Five rounds, each server in turn, the median of each: the VM's page cache and memory swing
  // from one second to the next, and a round sees the same swing on every server.
  for (int i = 0; i < 5; ++i) {
    last = Candidate(base, kSize, 100000 + i);  // new bytes each time: nothing deduplicated
    to_daemon.push_back(StreamSeconds(*daemon, last));
    to_sink.push_back(StreamSeconds(*sink.stub, last));
    to_hashing_sink.push_back(StreamSeconds(*hashing_sink.stub, last));
    to_beside_sink.push_back(StreamSeconds(*beside_sink.stub, last));
    to_storing_sink.push_back(StreamSeconds(*storing_sink.stub, last));
  }
  const double mb = static_cast<double>(kSize) / (1 << 20);
  const double daemon_rate = mb / Median(to_daemon), sink_rate = mb / Median(to_sink);
  const double hashing_rate = mb / Median(to_hashing_sink);
  const double beside_rate = mb / Median(to_beside_sink);
  const double storing_rate = mb / Median(to_storing_sink);
  // Against what a server that checks the bytes' SHA-256 (the module's id) as they come can
  // reach, storing nothing.
  Add("upload", "64 MiB LoadModule", absl::StrFormat("%.0f MB/s", daemon_rate),
      absl::StrFormat("raw stream hashed %.0f MB/s", hashing_rate), daemon_rate / hashing_rate,
      ">= 0.9: " + Met(daemon_rate / hashing_rate >= 0.9));
  Add("upload", "  the same against the raw stream", absl::StrFormat("%.0f MB/s", daemon_rate),
      absl::StrFormat("raw stream %.0f MB/s", sink_rate), daemon_rate / sink_rate, "");
  // ... and one that also writes them to a file (the page-cache copy every store pays).
  Add("upload", "  floor: raw stream hashed and written to a file",
      absl::StrFormat("%.0f MB/s", storing_rate),
      absl::StrFormat("raw stream hashed %.0f MB/s", hashing_rate), storing_rate / hashing_rate,
      "");
  Add("upload", "  floor: raw stream hashed as it arrives",
      absl::StrFormat("%.0f MB/s", hashing_rate),
      absl::StrFormat("raw stream %.0f MB/s", sink_rate), hashing_rate / sink_rate, "");
  Add("upload", "  floor: raw stream hashed beside, on a second thread",
      absl::StrFormat("%.0f MB/s", beside_rate), absl::StrFormat("raw stream %.0f MB/s", sink_rate),
      beside_rate / sink_rate, "");
  // The same bytes again: the client hashes them and asks; nothing travels.
  const auto start = Clock::now();
  Must(client.LoadModule(last, "upload.so"), "second upload");
  const double again = Seconds(Clock::now() - start);
  const auto hash_start = Clock::now();
  const std::string digest = kprof::base::Sha256Hex(last);
  const double hash = Seconds(Clock::now() - hash_start);
  Add("upload", "second upload of the same 64 MiB", Ms(again), "SHA-256 of them " + Ms(hash),
      again / hash, "<= 1.2: " + Met(again / hash <= 1.2));
}

}  // namespace kprof::bench
