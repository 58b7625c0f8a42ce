#include "core/modules/elf_inspector.h"

#include <elf.h>

#include <cstring>
#include <random>
#include <string>

#include "core/modules/module_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "module_files.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

// The host's machine and another one, so the checks read the same on x86-64 and arm64.
#if defined(__aarch64__)
constexpr uint16_t kHost = EM_AARCH64, kForeign = EM_X86_64;
constexpr const char* kHostName = "aarch64";
constexpr const char* kForeignName = "x86-64";
#else
constexpr uint16_t kHost = EM_X86_64, kForeign = EM_AARCH64;
constexpr const char* kHostName = "x86-64";
constexpr const char* kForeignName = "aarch64";
#endif

using ::kprof::testing::IsOk;
using ::kprof::testing::ReadFileBytes;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TestModulePath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A bare 64-bit ELF header for this host, with the fields tests change.
std::string Header(uint16_t type, uint16_t machine, unsigned char elf_class = ELFCLASS64) {
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = elf_class;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_type = type;
  h.e_machine = machine;
  h.e_version = EV_CURRENT;
  h.e_ehsize = sizeof h;
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

void ExpectInvalid(const std::string& bytes, const std::string& message) {
  EXPECT_THAT(InspectSharedLibrary(bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
}

TEST(InspectSharedLibrary, ListsExportedFunctionsOfARealModule) {
  auto info = InspectSharedLibrary(ReadFileBytes(TestModulePath("vector_add")));
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(info->functions, ElementsAre("vadd"));
  EXPECT_EQ(info->machine, HostElfMachine());
  EXPECT_EQ(HostElfMachine(), kHostName);

  auto many = InspectSharedLibrary(ReadFileBytes(TestModulePath("many_exports")));
  ASSERT_THAT(many, IsOk());
  EXPECT_EQ(many->functions.size(), 12u);
  EXPECT_EQ(many->functions.front(), "f00");
  EXPECT_EQ(many->functions.back(), "f11");
}

TEST(InspectSharedLibrary, EachKindOfBadBytesHasItsOwnError) {
  ExpectInvalid("", "the module is empty");
  ExpectInvalid("#!/bin/sh\necho hello\n", "not an ELF file");
  ExpectInvalid(
      "\x7f"
      "ELF",
      "truncated");
  ExpectInvalid(Header(ET_DYN, kHost, ELFCLASS32), "a 32-bit ELF, this host is 64-bit");
  ExpectInvalid(Header(ET_EXEC, kHost), "an executable, not a shared object");
  ExpectInvalid(Header(ET_REL, kHost), "an object file (.o), not a shared object");
  ExpectInvalid(Header(ET_DYN, kForeign),
                std::string("ELF for ") + kForeignName + ", this host is " + kHostName);
  ExpectInvalid(Header(ET_DYN, EM_RISCV), std::string("ELF for riscv, this host is ") + kHostName);
  ExpectInvalid(Header(ET_DYN, kHost), "no section headers");
  ExpectInvalid(Header(ET_DYN, kHost).substr(0, 40), "truncated: the ELF header");
}

TEST(InspectSharedLibrary, RandomBytesAreNotElf) {
  std::mt19937 rng(1);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  ExpectInvalid(bytes, "not an ELF file");
}

TEST(InspectSharedLibrary, TruncatedModuleIsTruncated) {
  const std::string bytes = ReadFileBytes(TestModulePath("vector_add"));
  ExpectInvalid(bytes.substr(0, 30), "truncated");
  ExpectInvalid(bytes.substr(0, bytes.size() / 2), "truncated");
}

// This test program, a position-independent executable (/proc/self/exe: the same file wherever
// the tests run from, a build tree or a board's root).
TEST(InspectSharedLibrary, PositionIndependentExecutableIsRefused) {
  ExpectInvalid(ReadFileBytes("/proc/self/exe"), "position-independent executable");
}

TEST(InspectSharedLibrary, ModuleExportingNothingIsRefused) {
  ExpectInvalid(ReadFileBytes(TestModulePath("exports_nothing")), "exports no functions");
}

TEST(InspectSharedLibrary, CorruptHeaderFieldsAreErrorsNotReads) {
  const std::string good = ReadFileBytes(TestModulePath("vector_add"));
  Elf64_Ehdr header;
  std::memcpy(&header, good.data(), sizeof header);
  const auto with = [&](auto mutate) {
    Elf64_Ehdr h = header;
    mutate(h);
    std::string bytes = good;
    std::memcpy(bytes.data(), &h, sizeof h);
    return bytes;
  };
  ExpectInvalid(with([](Elf64_Ehdr& h) { h.e_shoff = ~uint64_t{0} - 8; }), "truncated");
  ExpectInvalid(with([](Elf64_Ehdr& h) { h.e_phoff = uint64_t{1} << 62; }), "truncated");
  ExpectInvalid(with([](Elf64_Ehdr& h) { h.e_shentsize = 12; }), "malformed");
  ExpectInvalid(with([](Elf64_Ehdr& h) { h.e_phentsize = 12; }), "malformed");
  ExpectInvalid(with([](Elf64_Ehdr& h) { h.e_shnum = 0xFFFF; }), "truncated");
}

// Thousands of mutations of a real module: every one is inspected without a crash or an
// out-of-bounds read (the sanitizer build checks the latter), and every failure is
// INVALID_ARGUMENT.
TEST(InspectSharedLibrary, MutatedModulesNeverCrash) {
  const std::string good = ReadFileBytes(TestModulePath("vector_add"));
  std::mt19937 rng(2026);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      // Mostly the headers and tables, where the offsets live.
      const size_t at =
          rng() % 4 == 0 ? rng() % bytes.size() : rng() % std::min<size_t>(bytes.size(), 1024);
      bytes[at] = static_cast<char>(rng());
    }
    if (rng() % 5 == 0) bytes.resize(rng() % bytes.size());
    auto info = InspectSharedLibrary(bytes);
    if (info.ok()) {
      ++accepted;
    } else {
      ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
    }
  }
  EXPECT_GT(accepted, 0);  // some mutations hit bytes that do not matter
}

TEST(IsPrintableUtf8, TakesUtf8WithoutControlCharacters) {
  for (const char* good :
       {"vadd", "_Z4gemmPfS_", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", ""}) {
    EXPECT_TRUE(IsPrintableUtf8(good)) << good;
  }
  for (const char* bad : {"v\xff"
                          "dd",
                          "a\x1b[31m", "two\nlines", "\x7f", "\xc3", "\xc0\xaf", "\xed\xa0\x80",
                          "\xc2\x85", "\xf4\x90\x80\x80"}) {
    EXPECT_FALSE(IsPrintableUtf8(bad)) << QuoteBytes(bad);
  }
  EXPECT_EQ(QuoteBytes("a\x1b\\"), "'a\\x1b\\x5c'");
}

}  // namespace
}  // namespace kprof::core
