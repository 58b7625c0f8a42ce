// Hostile modules against a real daemon: one client runs each attack of tests/modules/attacks_*.c
// and the sandbox must refuse it, while a victim's job — from that client and from another —
// runs on a healthy worker, measures its known cost, and the daemon stays alive, unstopped,
// with its limits and priority as they were and its module cache untouched.
// And how the daemon says its workers are sandboxed, or refuses to run them unsandboxed.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/sha256.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "emulation.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "isolation_constants.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "module_files.h"
#include "nlohmann/json.hpp"
#include "processes.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::kAttackerToken;
using ::kprof::testing::kSlack;
using ::kprof::testing::kVictimToken;

using ::kprof::testing::ChildrenOf;
using ::kprof::testing::CommandOf;
using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::kprof::testing::TestModulePath;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// One field of /proc/PID/stat after the command name (1-based from the state, field 3).
std::string StatField(pid_t pid, int field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string value;
  for (int i = 3; i <= field; ++i) rest >> value;
  return value;
}

std::string LimitsLine(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) == 0) return line;
  }
  return "";
}

// Every file of the cache with its size and mode.
std::map<std::string, std::pair<off_t, mode_t>> CacheFiles(const std::string& dir) {
  std::map<std::string, std::pair<off_t, mode_t>> files;
  std::vector<std::string> pending = {dir};
  while (!pending.empty()) {
    const std::string path = pending.back();
    pending.pop_back();
    DIR* d = opendir(path.c_str());
    if (d == nullptr) continue;
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (lstat((path + "/" + name).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        pending.push_back(path + "/" + name);
      } else {
        files[path + "/" + name] = {st.st_size, st.st_mode};
      }
    }
    closedir(d);
  }
  return files;
}

// The system calls the unit's SystemCallFilter= lines leave allowed: the union of the allow
// lines less the union of the deny (~) lines, groups expanded by systemd-analyze. Empty when
// systemd-analyze is missing.
std::set<std::string> UnitSyscalls(const std::string& unit) {
  std::map<std::string, std::set<std::string>> groups;
  std::function<void(const std::string&, std::set<std::string>*)> expand =
      [&](const std::string& item, std::set<std::string>* into) {
        if (item.empty() || item[0] != '@') {
          into->insert(item);
          return;
        }
        if (!groups.count(item)) {
          std::set<std::string>& members = groups[item];
          FILE* out =
              popen(("systemd-analyze syscall-filter " + item + " 2>/dev/null").c_str(), "r");
          if (out == nullptr) return;
          char line[256];
          bool first = true;
          std::vector<std::string> nested;
          while (std::fgets(line, sizeof line, out) != nullptr) {
            std::string word(line);
            word.erase(0, word.find_first_not_of(" \t"));
            word.erase(word.find_last_not_of(" \t\n") + 1);
            if (first || word.empty() || word[0] == '#') {
              first = false;
              continue;
            }
            nested.push_back(word);
          }
          pclose(out);
          for (const std::string& n : nested) expand(n, &members);
        }
        into->insert(groups[item].begin(), groups[item].end());
      };
  std::set<std::string> allowed, denied;
  std::ifstream in(unit);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SystemCallFilter=", 0) != 0) continue;
    std::string value = line.substr(std::strlen("SystemCallFilter="));
    const bool deny = !value.empty() && value[0] == '~';
    if (deny) value.erase(0, 1);
    std::istringstream words(value);
    for (std::string word; words >> word;) expand(word, deny ? &denied : &allowed);
  }
  for (const std::string& d : denied) allowed.erase(d);
  return allowed;
}

// Run directly, and under the restrictions of the systemd unit (deploy/kprofd.service) applied
// by hand: its user, no capabilities, no_new_privs and its system call filter — where the
// workers' own sandbox (Landlock, seccomp, capabilities) must still be set up whole.
class IsolationTest : public ::testing::TestWithParam<bool> {
 protected:
  bool under_unit() const { return GetParam(); }

  void SetUp() override {
    std::ofstream(dir_.path() + "/tokens") << kAttackerToken << "\n" << kVictimToken << "\n";
    daemon_.set_stderr(dir_.path() + "/kprofd.log");
    if (under_unit()) {
      const std::set<std::string> syscalls = UnitSyscalls(KPROF_UNIT_FILE);
      if (syscalls.empty()) GTEST_SKIP() << "systemd-analyze cannot expand the unit's filter";
      std::ofstream list(dir_.path() + "/syscalls");
      for (const std::string& s : syscalls) list << s << "\n";
      list.close();
      // The unit's dynamic user must write the cache and read the tokens, and run the daemon
      // and its worker from where it may reach them (a build tree in a private directory is
      // out of its reach): copies of the two, side by side.
      chmod(dir_.path().c_str(), 0777);
      chmod((dir_.path() + "/tokens").c_str(), 0644);
      const std::filesystem::path built(testing::KprofdPath());
      const std::filesystem::path bin = dir_.path() + "/bin";
      std::filesystem::create_directory(bin);
      for (const char* program : {"kprofd", "kprofd-worker"}) {
        std::filesystem::copy_file(built.parent_path() / program, bin / program);
      }
      std::filesystem::permissions(
          bin, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                   std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                   std::filesystem::perms::others_exec);
      daemon_.set_program((bin / "kprofd").string());
      daemon_.set_launcher({KPROF_AS_UNIT_PATH, dir_.path() + "/syscalls", "61183"});
    }
    ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache", {"--token-file", dir_.path() + "/tokens"}))
        << Log();
    attacker_ = Connect(kAttackerToken);
    victim_ = Connect(kVictimToken);
    auto attacks = attacker_->LoadModuleFile(TestModulePath("attacks"));
    ASSERT_THAT(attacks, IsOk());
    attacks_ = attacks->id();
    // The victim's kernel costs 4 ms (a sleep to a deadline): its fastest repeat says whether
    // it ran as itself on a healthy worker.
    for (client::Client* client : {attacker_.get(), victim_.get()}) {
      auto kernel = client->LoadModuleFile(TestModulePath("candidate_2"));
      ASSERT_THAT(kernel, IsOk());
      kernel_ = kernel->id();
    }
  }

  std::unique_ptr<client::Client> Connect(const std::string& token) {
    client::ClientOptions options;
    options.bearer_token = token;
    options.timeout = absl::Seconds(30);
    auto connected = client::Client::Connect(daemon_.target(), options);
    EXPECT_THAT(connected, IsOk());
    return connected.ok() ? *std::move(connected) : nullptr;
  }

  std::string Log() const { return ReadFileBytes(dir_.path() + "/kprofd.log"); }

  absl::Status Attack(const std::string& function) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(attacks_);
    request.mutable_call()->set_function(function);
    request.set_number(1);
    request.set_repeat(1);
    return attacker_->TimeEvaluate(request).status();
  }

  // The victim's job, from `client`: ok, and measured at its own cost.
  void ExpectVictimMeasuredRight(client::Client* client, const std::string& after) {
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(kernel_);
    request.mutable_call()->set_function("gemm");
    request.set_number(1);
    request.set_repeat(11);  // the fastest of 11: wake-ups come late while another test runs
    auto response = client->TimeEvaluate(request);
    ASSERT_THAT(response, IsOk()) << "after " << after;
    EXPECT_GE(response->statistics().min(), 4e-3 * 0.995) << "after " << after;
    EXPECT_LE(response->statistics().min(), 4e-3 * kSlack) << "after " << after;
  }

  void ExpectDaemonUntouched(const std::string& after) {
    ASSERT_EQ(kill(daemon_.pid(), 0), 0) << "after " << after;
    EXPECT_NE(StatField(daemon_.pid(), 3), "T") << "the daemon was stopped by " << after;
    EXPECT_EQ(StatField(daemon_.pid(), 19), nice_) << "the daemon was reniced by " << after;
    EXPECT_EQ(LimitsLine(daemon_.pid(), "Max open files"), nofile_)
        << "the daemon's limits changed by " << after;
    // No process of the attack left: the daemon's children are the two clients' workers, and
    // they have none.
    const std::vector<pid_t> children = ChildrenOf(daemon_.pid());
    EXPECT_LE(children.size(), 2u) << "after " << after;
    for (pid_t child : children) {
      EXPECT_EQ(CommandOf(child), "kprofd-worker") << "after " << after;
      EXPECT_THAT(ChildrenOf(child), ::testing::IsEmpty()) << "a worker's child after " << after;
    }
  }

  TempDir dir_;
  Daemon daemon_;
  std::unique_ptr<client::Client> attacker_, victim_;
  std::string attacks_, kernel_;
  std::string nice_, nofile_;
};

TEST_P(IsolationTest, EveryAttackIsRefusedAndTheVictimIsMeasuredRight) {
  KPROF_SKIP_UNDER_EMULATION("does not pass seccomp filters through");
  // The workers' sandbox is whole, under the unit too (it must allow what setting it up takes).
  auto info = victim_->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(info->isolation(), HasSubstr("Landlock ABI"));
  EXPECT_THAT(info->isolation(), HasSubstr("seccomp filter"));
  for (const char* missing : {"no Landlock", "no seccomp", "capabilities kept"}) {
    EXPECT_THAT(info->isolation(), Not(HasSubstr(missing))) << Log();
  }
  // And perf's software counters count in the workers (the unit allows perf_event_open).
  v1::ProfileFunctionRequest profile;
  profile.mutable_call()->set_module_id("builtin");
  profile.mutable_call()->set_function("spin_us");
  profile.mutable_call()->add_args("float64:200");
  auto* perf = profile.add_collectors();
  perf->set_name("perf");
  perf->add_options("task-clock");
  EXPECT_THAT(victim_->ProfileFunction(profile), IsOk());
  nice_ = StatField(daemon_.pid(), 19);
  nofile_ = LimitsLine(daemon_.pid(), "Max open files");
  ASSERT_FALSE(nofile_.empty());
  const std::string cache = dir_.path() + "/cache";
  const auto cache_before = CacheFiles(cache);
  ASSERT_FALSE(cache_before.empty());

  const std::string eperm = std::to_string(EPERM);
  // Function, and the errno its attack is refused with.
  const std::pair<const char*, std::string> attacks[] = {
      {"forks_a_proxy", eperm},
      {"clones_a_process", eperm},
      {"execs", eperm},
      {"stops_the_daemon", eperm},
      {"terminates_the_daemon", eperm},
      {"signals_its_group", eperm},
      {"queues_a_signal_to_the_daemon", eperm},
      {"limits_the_daemon", eperm},
      {"renices_the_daemon", eperm},
      {"traces_the_daemon", eperm},
      {"sets_an_alarm", eperm},
      {"creates_a_timer", eperm},
      {"lowers_a_limit", eperm},
      {"ignores_sigterm", eperm},
      {"changes_directory", eperm},
      {"changes_umask", eperm},
      {"unpins_itself", eperm},
      {"starts_a_session", eperm},
      {"opens_a_tcp_socket", eperm},
      {"opens_a_vsock", eperm},
      {"signals_the_daemon_through_sigio", eperm},
      {"sets_up_io_uring", eperm},
      {"holds_capabilities", eperm},
      {"chmods_the_cache", eperm},
      // Landlock: the cache is neither readable nor writable, but for the client's own view.
      {"reads_the_cache", std::to_string(EACCES)},
      // Landlock's truncate right (kernel 6.2) refuses truncate(2) and O_TRUNC alike.
      {"truncates_the_cache", std::to_string(EACCES)},
      // Scratch space is the worker's own; /tmp, /dev/shm and /dev are the host's.
      {"writes_shared_tmp", std::to_string(EACCES)},
      {"reads_other_scratch", std::to_string(EACCES)},
      {"opens_a_device", std::to_string(EACCES)},
      {"uses_system_v_ipc", eperm},
      {"opens_a_message_queue", eperm},
      {"opens_a_unix_socket", eperm},
      {"makes_a_datagram_pair", eperm},
      // A root daemon's workers become another user (here, where the tests run as root).
      {"runs_as_root", eperm},
      {"reads_a_root_only_file", std::to_string(EACCES)},
  };
  for (const auto& [function, refused] : attacks) {
    EXPECT_THAT(Attack(function),
                StatusIs(absl::StatusCode::kAborted,
                         HasSubstr("function '" + std::string(function) + "' returned " + refused)))
        << Log();
    ExpectVictimMeasuredRight(victim_.get(), function);
    ExpectVictimMeasuredRight(attacker_.get(), function);
    ExpectDaemonUntouched(function);
  }
  EXPECT_EQ(CacheFiles(cache), cache_before);
}

TEST_P(IsolationTest, AReplacedJobSocketEndsTheWorkerAndTheNextJobRunsOnAFreshOne) {
  KPROF_SKIP_UNDER_EMULATION("does not pass seccomp filters through");
  nice_ = StatField(daemon_.pid(), 19);
  nofile_ = LimitsLine(daemon_.pid(), "Max open files");
  EXPECT_THAT(Attack("replaces_the_job_socket"),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("function 'replaces_the_job_socket' crashed")));
  ExpectVictimMeasuredRight(victim_.get(), "replaces_the_job_socket");
  ExpectVictimMeasuredRight(attacker_.get(), "replaces_the_job_socket");
  ExpectDaemonUntouched("replaces_the_job_socket");
  EXPECT_THAT(Log(), HasSubstr("replaced the job socket"));
}

// A module's file changed behind the daemon (an operator, a disk): the next job finds the file
// is not the one stored, drops the module and answers as for an unknown module — which the
// client library answers by uploading the bytes again, so its job runs the right code.
TEST_P(IsolationTest, AModuleFileChangedBehindTheDaemonIsDroppedAndUploadedAgain) {
  const std::string file = dir_.path() + "/cache/modules/" + kernel_;
  const std::string bytes = ReadFileBytes(TestModulePath("candidate_2"));
  ASSERT_EQ(ReadFileBytes(file), bytes);
  auto channel = grpc::CreateChannel(daemon_.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Profiler::NewStub(channel);
  int dropped = 0;
  for (const std::string change : {"appended", "chmod", "replaced"}) {
    if (change == "appended") {
      std::ofstream(file, std::ios::app) << "x";
    } else if (change == "chmod") {
      ASSERT_EQ(chmod(file.c_str(), 0600), 0);
    } else {
      ASSERT_EQ(unlink(file.c_str()), 0);
      std::ofstream(file, std::ios::binary) << bytes;  // the same bytes, another file
    }
    // What the wire says, without the library's re-upload.
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kVictimToken);
    v1::TimeEvaluateRequest request;
    request.mutable_call()->set_module_id(kernel_);
    request.mutable_call()->set_function("gemm");
    v1::TimeEvaluateResponse response;
    const grpc::Status status = stub->TimeEvaluate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << change;
    EXPECT_THAT(status.error_message(), AllOf(HasSubstr("unknown module " + kernel_),
                                              HasSubstr("changed or removed since it was stored")))
        << change;
    ++dropped;
    // Dropped for every holder; the library uploads the bytes again, stored afresh.
    ExpectVictimMeasuredRight(attacker_.get(), change);
    EXPECT_EQ(ReadFileBytes(file), bytes) << change;
    ExpectVictimMeasuredRight(victim_.get(), change);
  }
  std::string log = Log();
  int logged = 0;
  for (size_t at = 0; (at = log.find("its file in the cache changed since it was stored; dropped",
                                     at)) != std::string::npos;
       ++at) {
    ++logged;
  }
  EXPECT_EQ(logged, dropped);
}

INSTANTIATE_TEST_SUITE_P(Launch, IsolationTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& launch) {
                           return launch.param ? "UnderTheUnit" : "Direct";
                         });

TEST(Isolation, GetInfoSaysHowWorkersAreSandboxed) {
  KPROF_SKIP_UNDER_EMULATION("does not pass Landlock and seccomp through");
  TempDir dir;
  Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache"));
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto info = (*client)->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(info->isolation(), HasSubstr("one worker per client; Landlock ABI "));
  EXPECT_THAT(info->isolation(), HasSubstr("; seccomp filter"));
}

// On a kernel that offers neither (as JetPack's or qemu-user's may not), the daemon serves and
// says what is missing; with --require-isolation it refuses to start.
TEST(Isolation, WithoutLandlockAndSeccompTheDaemonSaysSoOrRefuses) {
  KPROF_SKIP_UNDER_EMULATION("does not pass seccomp filters through");
  TempDir dir;
  Daemon daemon;
  daemon.set_launcher({KPROF_WITHOUT_SANDBOX_PATH});
  daemon.set_stderr(dir.path() + "/log");
  ASSERT_TRUE(daemon.Start(dir.path() + "/cache")) << ReadFileBytes(dir.path() + "/log");
  auto client = client::Client::Connect(daemon.target());
  ASSERT_THAT(client, IsOk());
  auto info = (*client)->Info();
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(info->isolation(), HasSubstr("no Landlock ("));
  EXPECT_THAT(info->isolation(), HasSubstr("no seccomp filter ("));
  EXPECT_THAT(ReadFileBytes(dir.path() + "/log"), HasSubstr("warning worker isolation: "));
  daemon.Stop();

  Daemon strict;
  strict.set_launcher({KPROF_WITHOUT_SANDBOX_PATH});
  strict.set_stderr(dir.path() + "/strict.log");
  EXPECT_FALSE(strict.Start(dir.path() + "/cache2", {"--require-isolation"}));
  EXPECT_THAT(ReadFileBytes(dir.path() + "/strict.log"),
              HasSubstr("--require-isolation: workers would run without part of their sandbox"));
}

}  // namespace
}  // namespace kprof
