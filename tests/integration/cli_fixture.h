// The fixture of the CLI tests (cli_*test.cc): a real kprofd on 127.0.0.1:0 with its cache in a
// fresh directory, and the kprof binary run against it.
#pragma once

#include <string>

#include "cli.h"
#include "daemon.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof {

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.Start(dir_.path() + "/cache")); }

  // Runs kprof with `args` against the test's daemon.
  ::kprof::testing::CliResult Kprof(const std::string& args) {
    return ::kprof::testing::RunKprof(daemon_.target(), args, dir_.path());
  }

  ::kprof::testing::TempDir dir_;
  ::kprof::testing::Daemon daemon_;
};

}  // namespace kprof
