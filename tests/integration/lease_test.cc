// Device leases through a real kprofd: a holder has the device alone, other clients' jobs wait
// (or are refused at once when their deadline falls inside the lease), the lease ends on
// release, disconnect or expiry, its clocks are locked on a fake sysfs tree and a stand-in NVML
// and put back — at its end, and after the daemon is killed, at its next start. `kprof lease`
// runs a command under the lease and exits with its status.
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lease_fixture.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

TEST_F(LeaseTest, TheHolderHasTheDeviceAloneAndItsClocksAreLockedThenPutBack) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  auto bob = Connect("token-b");
  ASSERT_THAT(bob->TimeEvaluate(Sleep(1)), IsOk());  // bob's worker is up

  Held held = Ask(*alice, "cpu:0", 60, /*lock=*/true);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  const v1::LeaseInfo& lease = held.first.lease();
  EXPECT_EQ(lease.holder(), "alice");
  EXPECT_EQ(lease.device(), "cpu:0");
  EXPECT_TRUE(lease.clocks_locked()) << lease.clocks_note();
  EXPECT_GT(lease.ends_unix_ms(), absl::ToUnixMillis(absl::Now() + absl::Seconds(50)));
  sysfs_.ExpectLocked();
  bool governor_reported = false;
  for (const v1::ClockSetting& s : lease.clocks()) {
    if (s.name() == "cpu0-1 governor") {
      governor_reported = s.before() == "powersave" && s.during() == "performance";
    }
  }
  EXPECT_TRUE(governor_reported) << lease.DebugString();

  // GetInfo shows the lease to everyone, its id to the holder alone.
  auto seen_by_bob = bob->Info();
  ASSERT_THAT(seen_by_bob, IsOk());
  EXPECT_EQ(seen_by_bob->devices(0).lease().holder(), "alice");
  EXPECT_EQ(seen_by_bob->devices(0).lease().lease_id(), "");
  EXPECT_EQ(alice->Info()->devices(0).lease().lease_id(), "");  // not under the lease
  EXPECT_EQ(Connect("token-a", lease.lease_id())->Info()->devices(0).lease().lease_id(),
            lease.lease_id());
  const auto info = ::kprof::testing::RunKprof(
      daemon_.target(), "--token-file " + dir_.path() + "/tokens info", dir_.path());
  EXPECT_THAT(info.out, HasSubstr("leased to alice until"));
  EXPECT_THAT(info.out, HasSubstr("clocks locked"));

  // Bob's job with a deadline inside the lease is refused at once, naming the lease.
  auto refused = bob->TimeEvaluate(Sleep(1), absl::Seconds(5));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                HasSubstr("cpu:0 is leased to alice until")));
  // One that can wait, waits; alice's jobs run meanwhile, with the lease's id or without.
  std::atomic<bool> bob_done{false};
  absl::Time bob_finished;
  std::thread waiting([&] {
    EXPECT_THAT(bob->TimeEvaluate(Sleep(1), absl::Seconds(120)), IsOk());
    bob_finished = absl::Now();
    bob_done = true;
  });
  auto under_lease = Connect("token-a", lease.lease_id());
  for (int i = 0; i < 5; ++i) EXPECT_THAT(under_lease->TimeEvaluate(Sleep(1000)), IsOk());
  // Only calls carrying the lease run under it: the holder's others wait like anyone's (on a
  // loopback daemon every caller is one client).
  EXPECT_THAT(alice->TimeEvaluate(Sleep(1), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("leased to alice")));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(bob_done) << "bob's job ran under alice's lease";
  // Bob cannot use alice's lease id: it is hers.
  auto borrowed = Connect("token-b", lease.lease_id());
  EXPECT_THAT(borrowed->TimeEvaluate(Sleep(1)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another client's")));

  const absl::Time released = absl::Now();
  const v1::LeaseUpdate ended = Release(held);
  EXPECT_EQ(ended.state(), v1::LeaseUpdate::ENDED);
  EXPECT_EQ(ended.end_reason(), "released");
  EXPECT_THAT(ended.clocks_restored(), HasSubstr("cpu0-1 governor back to powersave"));
  sysfs_.ExpectAsFound();
  EXPECT_EQ(Journals(), 0);
  waiting.join();
  EXPECT_TRUE(bob_done);
  EXPECT_GE(bob_finished, released);
  // Calls that still carry the lease are refused now, saying so.
  EXPECT_THAT(under_lease->TimeEvaluate(Sleep(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has ended (released)")));
  EXPECT_FALSE(alice->Info()->devices(0).has_lease());
}

// A label cannot spell a lease's queue: "alice [lease]" is a client of its own, whose jobs wait
// out alice's lease like anyone's, and GetInfo names the lease's queue as alice's.
TEST_F(LeaseTest, ALabelThatSpellsALeasesQueueIsAClientOfItsOwn) {
  std::ofstream(dir_.path() + "/tokens") << "token-a alice\ntoken-m alice [lease]\n";
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  auto mallory = Connect("token-m");
  Held held = Ask(*alice, "cpu:0", 60);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  auto under_lease = Connect("token-a", held.first.lease().lease_id());
  ASSERT_THAT(under_lease->TimeEvaluate(Sleep(1)), IsOk());  // the lease's worker is up
  EXPECT_THAT(mallory->TimeEvaluate(Sleep(1), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("leased to alice")));
  // While a leased job runs, the queue it runs from is alice's lease, as GetInfo says it.
  std::thread running([&] { EXPECT_THAT(under_lease->TimeEvaluate(Sleep(300000)), IsOk()); });
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    auto info = mallory->Info();
    ASSERT_THAT(info, IsOk());
    seen = info->devices(0).running_client() == "alice (lease)";
    absl::SleepFor(absl::Milliseconds(10));
  }
  running.join();
  EXPECT_TRUE(seen) << "no job ran as alice (lease)";
  EXPECT_EQ(Release(held).state(), v1::LeaseUpdate::ENDED);
}

// A checked job under a lease: its reference runs under the lease too (in the holder's
// reference worker, apart from the lease's), and a wrong answer is named there as anywhere.
TEST_F(LeaseTest, ACheckedJobUnderALeaseIsJudgedThere) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 60);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  v1::TimeEvaluateRequest checked;
  checked.mutable_call()->set_module_id("builtin");
  checked.mutable_call()->set_function("copy");
  checked.mutable_call()->add_args("float32[16]");
  checked.mutable_call()->add_args("float32[16]:random");
  checked.mutable_check()->mutable_reference()->set_module_id("builtin");
  checked.mutable_check()->mutable_reference()->set_function("copy");
  auto under = Connect("token-a", held.first.lease().lease_id());
  absl::StatusOr<v1::TimeEvaluateResponse> passed = under->TimeEvaluate(checked);
  ASSERT_THAT(passed, IsOk());
  EXPECT_EQ(passed->check().outcome(), v1::CheckVerdict::PASSED);
  EXPECT_FALSE(passed->check().reference_reused());  // run under the lease
  EXPECT_GT(passed->statistics().median(), 0);
  // Filled with 1 where 2 is expected: wrong, under the lease as anywhere.
  v1::TimeEvaluateRequest wrong;
  wrong.mutable_call()->set_module_id("builtin");
  wrong.mutable_call()->set_function("fill");
  wrong.mutable_call()->add_args("float32[16]");
  wrong.mutable_call()->add_args("float64:1");
  v1::ExpectedOutput* expected = wrong.mutable_check()->add_expected();
  expected->set_dtype("float32");
  expected->add_shape(16);
  const std::vector<float> twos(16, 2.0f);
  expected->set_data(std::string(reinterpret_cast<const char*>(twos.data()), 16 * sizeof(float)));
  EXPECT_THAT(under->TimeEvaluate(wrong),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("wrong answer: function 'fill'")));
  EXPECT_TRUE(alice->Info()->devices(0).has_lease());  // the lease holds throughout
  Release(held);
  EXPECT_THAT(alice->TimeEvaluate(checked), IsOk());
}

TEST_F(LeaseTest, ALeaseEndsWhenItsHolderGoesAwayAndWhenItExpires) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  auto bob = Connect("token-b");
  {
    Held held = Ask(*alice, "cpu:0", 60);
    ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED);
    EXPECT_FALSE(held.first.lease().clocks_locked());  // recorded, not locked
    EXPECT_FALSE(held.first.lease().clocks().empty());
    held.lease->context.TryCancel();  // the holder disconnects
    (void)held.lease->stream->Finish();
  }
  // The daemon sees the holder go, and bob's job runs.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    auto info = bob->Info();
    ASSERT_THAT(info, IsOk());
    gone = !info->devices(0).has_lease();
    if (!gone) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the lease outlived its holder";
  EXPECT_THAT(bob->TimeEvaluate(Sleep(1), absl::Seconds(20)), IsOk());
  sysfs_.ExpectAsFound();

  Held held = Ask(*alice, "cpu:0", 1.0);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED);
  // A second lease waits its turn, told whose the device is (not the holder's id).
  Held next = Ask(*bob, "cpu:0", 5);
  EXPECT_EQ(next.first.state(), v1::LeaseUpdate::WAITING);
  EXPECT_EQ(next.first.lease().holder(), "alice");
  EXPECT_EQ(next.first.lease().lease_id(), "");
  // A job under the lease runs past its end; the one queued behind it never runs without it.
  auto under_lease = Connect("token-a", held.first.lease().lease_id());
  std::thread running([&] { EXPECT_THAT(under_lease->TimeEvaluate(Sleep(1'500'000)), IsOk()); });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_THAT(under_lease->TimeEvaluate(Sleep(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has ended")));
  running.join();
  v1::LeaseUpdate update;
  ASSERT_TRUE(held.lease->stream->Read(&update));
  EXPECT_EQ(update.state(), v1::LeaseUpdate::ENDED);
  EXPECT_EQ(update.end_reason(), "expired");
  ASSERT_TRUE(next.lease->stream->Read(&update));
  EXPECT_EQ(update.state(), v1::LeaseUpdate::GRANTED);
  EXPECT_EQ(update.lease().holder(), "bob");
  EXPECT_EQ(Release(next).end_reason(), "released");
  held.lease->stream->WritesDone();
  EXPECT_TRUE(held.lease->stream->Finish().ok());
}

TEST_F(LeaseTest, WhoMayLeaseAndForHowLongIsTheOperators) {
  ASSERT_TRUE(Start({"--lease-clients", "alice", "--max-lease", "1m"}));
  auto alice = Connect("token-a");
  auto bob = Connect("token-b");
  const auto refusal = [](client::Client& c, const std::string& device, double seconds) {
    Held held;
    held.lease = c.OpenLease();
    v1::LeaseRequest request;
    request.set_device(device);
    request.set_seconds(seconds);
    EXPECT_TRUE(held.lease->stream->Write(request));
    v1::LeaseUpdate update;
    EXPECT_FALSE(held.lease->stream->Read(&update));
    return held.lease->stream->Finish();
  };
  grpc::Status status = refusal(*bob, "cpu:0", 10);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("--lease-clients alice"));
  status = refusal(*alice, "cpu:0", 120);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("--max-lease 1m"));
  status = refusal(*alice, "cuda:7", 10);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_THAT(status.error_message(), HasSubstr("cuda:7"));
  // A frequency the CPUs do not take, or one below their floor (the base clock): the lease is
  // not granted, saying why.
  for (const auto& [mhz, why] :
       {std::pair{9000, "refused: clock_mhz 9000 is outside"},
        std::pair{800,
                  "refused: clock_mhz 800 is below cpu0-1's floor, 2400 MHz (its base clock)"}}) {
    Held held;
    held.lease = alice->OpenLease();
    v1::LeaseRequest request;
    request.set_device("cpu:0");
    request.set_seconds(10);
    request.set_lock_clocks(true);
    request.set_clock_mhz(mhz);
    ASSERT_TRUE(held.lease->stream->Write(request));
    v1::LeaseUpdate update;
    ASSERT_TRUE(held.lease->stream->Read(&update));
    EXPECT_EQ(update.state(), v1::LeaseUpdate::ENDED);
    EXPECT_THAT(update.end_reason(), HasSubstr(why));
    held.lease->stream->WritesDone();
    EXPECT_TRUE(held.lease->stream->Finish().ok());
    sysfs_.ExpectAsFound();
  }
  // A call carrying a lease the daemon never granted.
  auto forged = Connect("token-a", "0123456789abcdef");
  EXPECT_THAT(forged->TimeEvaluate(Sleep(1)), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                       HasSubstr("no lease 0123456789abcdef")));
}

// A cpu:0 lease sets the clocks of the CPUs the daemon measures on (--pin-cpus) alone: a
// cpufreq policy that also runs others is left as it is, and the lease says so.
TEST_F(LeaseTest, ALeaseSetsOnlyTheClocksOfTheCpusTheDaemonMeasuresOn) {
  ASSERT_TRUE(Start({"--pin-cpus", "1"}));
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 60, /*lock=*/true);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  EXPECT_FALSE(held.first.lease().clocks_locked());
  EXPECT_THAT(held.first.lease().clocks_note(),
              HasSubstr("cpu0-1's clock left as it is: it also runs CPUs kprofd does not measure "
                        "on (--pin-cpus)"));
  sysfs_.ExpectAsFound();
  EXPECT_EQ(Release(held).state(), v1::LeaseUpdate::ENDED);
}

TEST_F(LeaseTest, NoOneMayLeaseUnlessTheOperatorSaysWho) {
  // A loopback daemon too: its users are all "local" to it, and --lease-clients local says so.
  ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache",
                            {"--sysfs-root", sysfs_.root, "--state-dir", dir_.path() + "/state"}));
  auto anyone = client::Client::Connect(daemon_.target());
  ASSERT_THAT(anyone, IsOk());
  Held held;
  held.lease = (*anyone)->OpenLease();
  v1::LeaseRequest request;
  request.set_device("cpu:0");
  request.set_seconds(10);
  ASSERT_TRUE(held.lease->stream->Write(request));
  v1::LeaseUpdate update;
  EXPECT_FALSE(held.lease->stream->Read(&update));
  const grpc::Status status = held.lease->stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("--lease-clients names none"));
}

TEST_F(LeaseTest, KprofLeaseRunsTheCommandUnderTheLeaseAndExitsWithItsStatus) {
  ASSERT_TRUE(Start());
  const std::string tokens = dir_.path() + "/tokens";
  const std::string script = dir_.path() + "/under-lease.sh";
  // The command measures through kprof (its calls are the holder's) and exits 3.
  std::ofstream(script) << "#!/bin/sh\necho \"lease=$KPROF_LEASE target=$KPROF_TARGET\"\n"
                        << ::kprof::testing::KprofPath()
                        << " time builtin spin_us --arg float64:100 --number 1 --repeat 1 "
                           "--format json > "
                        << dir_.path() << "/timed.json || exit 9\nexit 3\n";
  chmod(script.c_str(), 0755);
  const auto cli = ::kprof::testing::RunKprof(
      daemon_.target(),
      "--token-file " + tokens + " lease cpu:0 --for 1m --lock-clocks -- " + script, dir_.path());
  EXPECT_EQ(cli.exit_code, 3) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr("lease="));
  EXPECT_THAT(cli.out, HasSubstr("target=" + daemon_.target()));
  EXPECT_THAT(cli.err, HasSubstr("cpu:0 is yours until"));
  EXPECT_THAT(cli.err, HasSubstr("clocks locked"));
  EXPECT_THAT(Slurp(dir_.path() + "/timed.json"), HasSubstr("\"mean\""));
  sysfs_.ExpectAsFound();

  // Refused: the command does not run, and kprof says why.
  const auto bad = ::kprof::testing::RunKprof(
      daemon_.target(), "--token-file " + tokens + " lease cpu:0 --for soon -- true", dir_.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--for 'soon' is not a duration"));
}

TEST_F(LeaseTest, AStoppingDaemonEndsTheLeaseAndPutsItsClocksBack) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 600, /*lock=*/true);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED);
  sysfs_.ExpectLocked();
  std::thread stopping([&] { daemon_.Stop(); });
  v1::LeaseUpdate update;
  ASSERT_TRUE(held.lease->stream->Read(&update));
  EXPECT_EQ(update.state(), v1::LeaseUpdate::ENDED);
  EXPECT_EQ(update.end_reason(), "kprofd is stopping");
  EXPECT_EQ(update.lease().lease_id(), held.first.lease().lease_id());
  EXPECT_THAT(update.clocks_restored(), HasSubstr("back to"));
  stopping.join();
  sysfs_.ExpectAsFound();
  EXPECT_EQ(Journals(), 0);
}

// Every signal that stops kprofd drains it (HUP, QUIT, USR1 and USR2 as TERM): a leased job
// that runs then finishes before the clocks go back, and kprofd exits 0.
TEST_F(LeaseTest, EveryStoppingSignalDrainsAndTheClocksGoBackAfterTheLeasedJob) {
  for (int sig : {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    ASSERT_TRUE(Start());
    auto alice = Connect("token-a");
    Held held = Ask(*alice, "cpu:0", 600, /*lock=*/true);
    ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED);
    auto under_lease = Connect("token-a", held.first.lease().lease_id());
    ASSERT_THAT(under_lease->TimeEvaluate(Sleep(1)), IsOk());  // the lease's worker is up
    std::thread job([&] { EXPECT_THAT(under_lease->TimeEvaluate(Sleep(500000)), IsOk()); });
    absl::SleepFor(absl::Milliseconds(200));  // it runs: two calls of 0.5 s
    const absl::Time signalled = absl::Now();
    ASSERT_EQ(kill(daemon_.pid(), sig), 0);
    v1::LeaseUpdate update;
    ASSERT_TRUE(held.lease->stream->Read(&update));
    EXPECT_EQ(update.state(), v1::LeaseUpdate::ENDED);
    EXPECT_THAT(update.clocks_restored(), HasSubstr("back to"));
    EXPECT_GE(absl::Now() - signalled, absl::Milliseconds(500))
        << "the clocks went back while the leased job ran";
    job.join();
    EXPECT_EQ(daemon_.Stop(), 0);
    sysfs_.ExpectAsFound();
  }
}

// A leased job longer than the drain's bound is killed at its end (10 s), and only then do
// the clocks go back: kprofd is gone well within systemd's 30 s.
TEST_F(LeaseTest, TheDrainEndsWithinItsBoundAndTheClocksGoBackAfterTheJobItKilled) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 600, /*lock=*/true);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED);
  auto under_lease = Connect("token-a", held.first.lease().lease_id());
  std::thread job([&] {
    const auto killed = under_lease->TimeEvaluate(Sleep(30000000), absl::Seconds(120));
    EXPECT_FALSE(killed.ok()) << "a 30 s job outlived a 10 s drain";
  });
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time signalled = absl::Now();
  ASSERT_EQ(kill(daemon_.pid(), SIGTERM), 0);
  v1::LeaseUpdate update;
  ASSERT_TRUE(held.lease->stream->Read(&update));
  EXPECT_THAT(update.clocks_restored(), HasSubstr("back to"));
  EXPECT_GE(absl::Now() - signalled, absl::Seconds(9));  // after the job, killed at 10 s
  job.join();
  EXPECT_EQ(daemon_.Stop(), 0);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(20));
  sysfs_.ExpectAsFound();
}

TEST_F(LeaseTest, ClocksALeaseChangedAreBackAfterTheDaemonIsKilled) {
#ifndef KPROF_FAKE_CUDA_DIR
  GTEST_SKIP() << "built without the stand-in CUDA driver and NVML";
#else
  const std::string nvml_state = dir_.path() + "/nvml";
  daemon_.set_env("LD_LIBRARY_PATH", KPROF_FAKE_CUDA_DIR);
  daemon_.set_env("KPROF_FAKE_NVML_STATE", nvml_state);
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  Held gpu = Ask(*alice, "cuda:0", 600, /*lock=*/true);
  ASSERT_EQ(gpu.first.state(), v1::LeaseUpdate::GRANTED) << gpu.first.end_reason();
  EXPECT_TRUE(gpu.first.lease().clocks_locked()) << gpu.first.lease().clocks_note();
  EXPECT_EQ(Slurp(nvml_state + ".locked"), "1590 1590");  // the GPU's base clock
  Held cpu = Ask(*alice, "cpu:0", 600, /*lock=*/true);
  ASSERT_EQ(cpu.first.state(), v1::LeaseUpdate::GRANTED);
  sysfs_.ExpectLocked();
  // Each lease puts back its own clocks alone: the GPU stays locked as the CPU lease ends.
  EXPECT_EQ(Release(cpu).end_reason(), "released");
  sysfs_.ExpectAsFound();
  EXPECT_EQ(Slurp(nvml_state + ".locked"), "1590 1590");
  Held cpu_again = Ask(*alice, "cpu:0", 600, /*lock=*/true);
  ASSERT_EQ(cpu_again.first.state(), v1::LeaseUpdate::GRANTED);
  sysfs_.ExpectLocked();

  daemon_.Kill();
  // Nothing of the daemon's shutdown ran: the clocks are still as the leases set them.
  EXPECT_TRUE(std::filesystem::exists(nvml_state + ".locked"));
  sysfs_.ExpectLocked();
  EXPECT_EQ(Journals(), 2);

  ASSERT_TRUE(Start());
  EXPECT_FALSE(std::filesystem::exists(nvml_state + ".locked"));
  sysfs_.ExpectAsFound();
  EXPECT_EQ(Journals(), 0);
  EXPECT_THAT(Slurp(dir_.path() + "/kprofd.log"),
              HasSubstr("put back the clocks a lease of an earlier run left changed"));

  // Where NVML will not lock (not root), the lease says so and records the clocks instead.
  Put(nvml_state + ".deny", "");
  auto again = Connect("token-a");
  Held denied = Ask(*again, "cuda:0", 60, /*lock=*/true);
  ASSERT_EQ(denied.first.state(), v1::LeaseUpdate::GRANTED);
  EXPECT_FALSE(denied.first.lease().clocks_locked());
  EXPECT_THAT(denied.first.lease().clocks_note(), HasSubstr("not locked"));
  EXPECT_FALSE(std::filesystem::exists(nvml_state + ".locked"));
  bool recorded = false;
  for (const v1::ClockSetting& s : denied.first.lease().clocks()) {
    recorded |= s.name() == "GPU SM clock (MHz)" && s.before() == "1980" && s.during().empty();
  }
  EXPECT_TRUE(recorded) << denied.first.lease().DebugString();
  EXPECT_EQ(Release(denied).end_reason(), "released");
#endif
}

}  // namespace
}  // namespace kprof
