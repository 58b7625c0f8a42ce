#include "core/host/cpu_info.h"

#include "gtest/gtest.h"

namespace kprof::core {
namespace {

// Excerpts of real /proc/cpuinfo texts.
constexpr char kX86[] =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "model\t\t: 1\n"
    "model name\t: AMD EPYC 7B13\n"
    "cpu MHz\t\t: 2449.998\n"
    "\n"
    "processor\t: 1\n"
    "model name\t: AMD EPYC 7B13\n";

// A Jetson AGX Orin: no "model name", a "Model" line from the device tree at the end.
constexpr char kJetson[] =
    "processor\t: 0\n"
    "BogoMIPS\t: 62.50\n"
    "CPU implementer\t: 0x41\n"
    "CPU part\t: 0xd42\n"
    "\n"
    "Model\t\t: NVIDIA Jetson AGX Orin Developer Kit\n";

// An older arm kernel: "Hardware".
constexpr char kOldArm[] =
    "processor\t: 0\n"
    "model\t: 3\n"
    "Hardware\t: BCM2835\n";

TEST(CpuInfo, FieldsAreMatchedByTheirWholeKey) {
  EXPECT_EQ(CpuInfoField(kX86, "model name"), "AMD EPYC 7B13");
  EXPECT_EQ(CpuInfoField(kX86, "model"), "1");  // not "model name"
  EXPECT_EQ(CpuInfoField(kX86, "cpu MHz"), "2449.998");
  EXPECT_EQ(CpuInfoField(kX86, "Model"), std::nullopt);
  EXPECT_EQ(CpuInfoField("", "model name"), std::nullopt);
}

TEST(CpuInfo, ModelNameOnX86Arm64BoardsAndOlderArm) {
  EXPECT_EQ(CpuModelName(kX86), "AMD EPYC 7B13");
  EXPECT_EQ(CpuModelName(kJetson), "NVIDIA Jetson AGX Orin Developer Kit");
  EXPECT_EQ(CpuModelName(kOldArm), "BCM2835");
  EXPECT_EQ(CpuModelName("processor\t: 0\n"), "");
}

TEST(CpuInfo, ThisHostsTextIsRead) {
  EXPECT_NE(HostCpuInfo().find("processor"), std::string::npos);
  EXPECT_EQ(&HostCpuInfo(), &HostCpuInfo());  // read once
}

}  // namespace
}  // namespace kprof::core
