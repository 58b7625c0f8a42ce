// The mix that once corrupted the front's heap, against real daemons: a C++ farm batch, a CLI
// farm batch and a Python farm batch over two daemons, a Python stream and unary calls on the
// first, streams cancelled or dropped mid-way, and the second daemon killed mid-round. The first
// must come through every round serving, and stop cleanly with nothing on its stderr that a
// sanitizer or the allocator says. Rounds: $KPROF_STRESS_ROUNDS (default 2), for long runs under
// ASan or TSan.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cli.h"
#include "client/farm.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;

int Rounds() {
  const char* text = std::getenv("KPROF_STRESS_ROUNDS");
  const int rounds = text != nullptr ? std::atoi(text) : 0;
  return rounds > 0 ? rounds : 2;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Distinct modules: vector_add.so with a few bytes of its own appended (the loader reads only
// what the headers name), so each has an id of its own. The batches use the first few, the
// uploaders the rest: more than the daemon holds (evictions, and uploads again, while jobs
// run), but never more in use at once than it holds (no job refused for a full cache).
constexpr int kModules = 3;
constexpr int kUploadModules = 8;
constexpr int kHeldModules = 8;

std::string ModuleVariant(const std::string& dir, int i) {
  const std::string path = dir + "/m" + std::to_string(i) + ".so";
  std::ofstream out(path, std::ios::binary);
  out << ::kprof::testing::ReadFileBytes(::kprof::testing::TestModulePath("vector_add"))
      << "variant " << i;
  return path;
}

// A vadd of module `id`.
v1::BatchJob Vadd(const std::string& id, const std::string& module_id) {
  v1::BatchJob job;
  job.set_id(id);
  v1::TimeEvaluateRequest* r = job.mutable_time_evaluate();
  r->mutable_call()->set_module_id(module_id);
  r->mutable_call()->set_function("vadd");
  for (const char* a : {"float32[64]:zeros", "float32[64]:ones", "float32[64]:ones"}) {
    r->mutable_call()->add_args(a);
  }
  return job;
}

v1::BatchJob Spin(const std::string& id) {
  v1::BatchJob job;
  job.set_id(id);
  v1::TimeEvaluateRequest* r = job.mutable_time_evaluate();
  r->mutable_call()->set_module_id("builtin");
  r->mutable_call()->set_function("spin_us");
  r->mutable_call()->add_args("float64:200");
  r->set_repeat(2);
  return job;
}

// Runs `command` through the shell; its exit status, and its output in `out`.
int Shell(const std::string& command, std::string* out) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A Python batch of `n` jobs: over a farm (`farm`) or one daemon's stream.
std::string PythonBatch(const std::string& target, int n, bool farm, const std::string& dir) {
  const std::string script = dir + (farm ? "/farm.py" : "/stream.py");
  std::ofstream(script)
      << "import sys, kprof\n"
         "target, n, farm = sys.argv[1], int(sys.argv[2]), sys.argv[3] == '1'\n"
         "def job(i):\n"
         "    if i % 3:\n"
         "        return {'id': f'p{i}', 'module': 'builtin', 'function': 'spin_us',\n"
         "                'args': ['float64:200'], 'repeat': 2}\n"
         "    return {'id': f'p{i}', 'module': '" +
             dir + "/m' + str(i % " + std::to_string(kModules) +
             ") + '.so',\n"
             "            'function': 'vadd', 'args': ['float32[64]', 'float32[64]:ones',\n"
             "            'float32[64]:ones'], 'repeat': 1}\n"
             "jobs = [job(i) for i in range(n)]\n"
             "with (kprof.farm(target) if farm else kprof.connect(target)) as c:\n"
             "    results = list(c.batch(jobs))\n"
             "bad = [r for r in results if not r.ok]\n"
             "print(len(results), len(bad), bad[:1] and bad[0].message)\n"
             "sys.exit(0 if len(results) == n and not bad else 1)\n";
  return "PYTHONPATH=" KPROF_PYTHON_DIR " /usr/bin/python3 " + script + " '" + target + "' " +
         std::to_string(n) + (farm ? " 1" : " 0") + " 2>&1";
}

TEST(StressTest, FarmsStreamsUnaryCallsCancellationsAndAKilledDaemon) {
  TempDir dir;
  Daemon first;
  first.set_stderr(dir.path() + "/first.err");
  // Fewer modules held than the batches use: evictions, and uploads again, while jobs run.
  ASSERT_TRUE(
      first.Start(dir.path() + "/cache-first", {"--max-modules", std::to_string(kHeldModules)}));
  std::vector<std::string> variants, uploaded;
  for (int i = 0; i < kModules; ++i) variants.push_back(ModuleVariant(dir.path(), i));
  for (int i = 0; i < kUploadModules; ++i) {
    uploaded.push_back(ModuleVariant(dir.path(), kModules + i));
  }
  auto unary_client = client::Client::Connect(first.target());
  ASSERT_THAT(unary_client, IsOk());
  std::ofstream jobs_file(dir.path() + "/jobs.jsonl");
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0) {
      jobs_file << "{\"id\": \"c" << i << "\", \"module\": \"" << variants[i % kModules]
                << "\", \"function\": \"vadd\", \"args\": [\"float32[64]\", "
                   "\"float32[64]:ones\", \"float32[64]:ones\"], \"repeat\": 1}\n";
    } else {
      jobs_file << "{\"id\": \"c" << i
                << "\", \"module\": \"builtin\", \"function\": \"spin_us\", \"args\": "
                   "[\"float64:200\"], \"repeat\": 2}\n";
    }
  }
  jobs_file.close();

  for (int round = 0; round < Rounds(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Daemon second;
    ASSERT_TRUE(second.Start(dir.path() + "/cache-second-" + std::to_string(round)));
    const std::string farm_target = first.target() + "," + second.target();
    std::vector<std::string> failures;
    std::mutex failures_mutex;
    const auto fail = [&](const std::string& what) {
      std::lock_guard<std::mutex> lock(failures_mutex);
      failures.push_back(what);
    };
    std::vector<std::thread> work;
    std::atomic<int> farm_done{0};
    // A C++ farm batch over both.
    work.emplace_back([&] {
      auto farm = client::Farm::Connect(farm_target);
      if (!farm.ok()) return fail("farm: " + std::string(farm.status().message()));
      std::vector<std::string> ids;
      for (const std::string& path : variants) {
        auto id = (*farm)->AddModuleFile(path);
        if (!id.ok()) return fail("farm module: " + std::string(id.status().message()));
        ids.push_back(*id);
      }
      std::vector<v1::BatchJob> jobs;
      for (int i = 0; i < 600; ++i) {
        const std::string id = "f" + std::to_string(i);
        jobs.push_back(i % 3 == 0 ? Vadd(id, ids[static_cast<size_t>(i) % ids.size()]) : Spin(id));
      }
      std::string first_failure;
      const absl::Status status = (*farm)->MeasureBatch(jobs, [&](const v1::BatchUpdate& u) {
        farm_done += u.state() == v1::BatchUpdate::DONE;
        if (u.state() == v1::BatchUpdate::FAILED && first_failure.empty()) {
          first_failure = u.id() + ": " + u.message();
        }
      });
      if (!status.ok() || farm_done != 600) {
        fail("C++ farm: " + status.ToString() + ", " + std::to_string(farm_done) +
             " of 600 done; " + first_failure);
      }
    });
    // The CLI's farm batch over both.
    work.emplace_back([&] {
      const auto r = ::kprof::testing::RunKprof(
          farm_target, "batch " + dir.path() + "/jobs.jsonl > " + dir.path() + "/cli.out",
          dir.path());
      if (r.exit_code != 0)
        fail("kprof batch exited " + std::to_string(r.exit_code) + ": " + r.err);
    });

    // Uploads of the same bytes from four clients at once, then a job on them.
    for (int u = 0; u < 4; ++u) {
      work.emplace_back([&, u] {
        auto client = client::Client::Connect(first.target());
        if (!client.ok()) return fail("uploader: " + std::string(client.status().message()));
        for (int i = 0; i < kUploadModules; ++i) {
          const std::string& path = uploaded[static_cast<size_t>((i + 2 * u) % kUploadModules)];
          auto module = (*client)->LoadModuleFile(path);
          if (!module.ok()) return fail("upload: " + module.status().ToString());
          v1::TimeEvaluateRequest r = Vadd("u", module->id()).time_evaluate();
          // The module may be evicted before the job: the client uploads it again.
          if (auto answer = (*client)->TimeEvaluate(r); !answer.ok()) {
            return fail("job after upload: " + answer.status().ToString());
          }
        }
      });
    }
    // Unary calls on the first.
    work.emplace_back([&] {
      for (int i = 0; i < 60; ++i) {
        v1::TimeEvaluateRequest r = Spin("u").time_evaluate();
        if (auto answer = (*unary_client)->TimeEvaluate(r); !answer.ok()) {
          fail("unary: " + answer.status().ToString());
          return;
        }
      }
    });
    // Streams on the first that are cancelled after a few answers, or dropped unfinished (a
    // cancelled one counts against the client's streams no more).
    work.emplace_back([&] {
      auto channel = grpc::CreateChannel(first.target(), grpc::InsecureChannelCredentials());
      auto stub = v1::Profiler::NewStub(channel);
      for (int s = 0; s < 12; ++s) {
        grpc::ClientContext context;
        auto stream = stub->MeasureBatch(&context);
        v1::BatchRequest request;
        for (int i = 0; i < 40; ++i) *request.add_jobs() = Spin("x" + std::to_string(i));
        if (!stream->Write(request)) continue;
        v1::BatchUpdate update;
        for (int seen = 0; seen < 3 + s % 5 && stream->Read(&update); ++seen) {
        }
        if (s % 3 == 0) {
          stream->WritesDone();  // half-closed, then cancelled
        }
        context.TryCancel();
        while (stream->Read(&update)) {
        }
        stream->Finish();
      }
      // Then a 200-job Python stream, and a Python farm's batch over both daemons: the two
      // farms' streams and this thread's one are one fewer than the daemon lets one client have
      // open (4) — a stream cancelled a moment ago may count until the daemon hears of it.
      std::string out;
      if (Shell(PythonBatch(first.target(), 200, false, dir.path()), &out) != 0) {
        fail("Python stream: " + out);
      }
      if (Shell(PythonBatch(farm_target, 300, true, dir.path()), &out) != 0) {
        fail("Python farm: " + out);
      }
    });
    // Mid-round, the second daemon dies: once the C++ farm is a little way into its batch
    // (sooner or later from round to round).
    const int kill_after = 50 + 100 * (round % 4);
    for (int waited = 0; farm_done < kill_after && waited < 3000; waited += 5) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_LT(farm_done, 600) << "the farm batch ended before the daemon was killed";
    kill(second.pid(), SIGKILL);
    for (std::thread& t : work) t.join();
    EXPECT_THAT(failures, ::testing::IsEmpty()) << "the first daemon's stderr:\n"
                                                << ReadAll(dir.path() + "/first.err");
    // The first serves on.
    ASSERT_EQ(kill(first.pid(), 0), 0)
        << "the first daemon died: " << ReadAll(dir.path() + "/first.err");
    ASSERT_THAT((*unary_client)->Info(), IsOk()) << "the first daemon's stderr:\n"
                                                 << ReadAll(dir.path() + "/first.err");
  }
  const int status = first.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  const std::string err = ReadAll(dir.path() + "/first.err");
  for (const char* sign : {"AddressSanitizer", "ThreadSanitizer", "LeakSanitizer",
                           "runtime error:", "malloc()", "free()", "double free", "corrupted"}) {
    EXPECT_FALSE(absl::StrContains(err, sign)) << sign << " in the daemon's stderr:\n" << err;
  }
}

}  // namespace
}  // namespace kprof
