// Under emulation: `make test-arm64` runs the tests under qemu-user and says so in
// $KPROF_TEST_EMULATOR. qemu-user has no perf_event_open, does not enforce RLIMIT_DATA, and runs
// a few times slower, so the tests of those things say why they skip there.
#pragma once

#include <cstdlib>
#include <string>

namespace kprof::testing {

// "qemu-user" under `make test-arm64`; "" natively.
inline std::string Emulator() {
  const char* name = std::getenv("KPROF_TEST_EMULATOR");
  return name != nullptr ? name : "";
}

}  // namespace kprof::testing

// Skips the test under emulation, saying what the emulator lacks.
#define KPROF_SKIP_UNDER_EMULATION(what)                           \
  if (!::kprof::testing::Emulator().empty()) {                     \
    GTEST_SKIP() << ::kprof::testing::Emulator() << " " << (what); \
  }
