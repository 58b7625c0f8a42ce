#include "core/host/platform.h"

#include <sys/utsname.h>

#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"

namespace kprof::core {
namespace {

// The JetPack release of each L4T release NVIDIA published, from its JetPack archive.
struct JetPackOf {
  int major, minor, patch;
  const char* jetpack;
};
constexpr JetPackOf kJetPacks[] = {
    {32, 4, 3, "4.4"},      {32, 4, 4, "4.4.1"}, {32, 5, 0, "4.5"},   {32, 5, 1, "4.5.1"},
    {32, 6, 1, "4.6"},      {32, 7, 1, "4.6.1"}, {32, 7, 2, "4.6.2"}, {32, 7, 3, "4.6.3"},
    {32, 7, 4, "4.6.4"},    {32, 7, 5, "4.6.5"}, {32, 7, 6, "4.6.6"}, {34, 1, 0, "5.0 DP"},
    {34, 1, 1, "5.0.1 DP"}, {35, 1, 0, "5.0.2"}, {35, 2, 1, "5.1"},   {35, 3, 1, "5.1.1"},
    {35, 4, 1, "5.1.2"},    {35, 5, 0, "5.1.3"}, {35, 6, 0, "5.1.4"}, {35, 6, 1, "5.1.5"},
    {36, 2, 0, "6.0 DP"},   {36, 3, 0, "6.0"},   {36, 4, 0, "6.1"},   {36, 4, 3, "6.2"},
    {36, 4, 4, "6.2.1"},    {38, 2, 0, "7.0"},
};
// Each L4T major release's JetPack, for a revision the table does not have yet.
constexpr std::pair<int, const char*> kJetPackMajors[] = {
    {32, "4"}, {34, "5"}, {35, "5"}, {36, "6"}, {38, "7"}};

// "4.3" -> 4, 3; "4" -> 4, 0.
bool ParseRevision(absl::string_view text, int* minor, int* patch) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], minor) || *minor < 0) return false;
  *patch = 0;
  return parts.size() == 1 || (absl::SimpleAtoi(parts[1], patch) && *patch >= 0);
}

// os-release's value of `key`, unquoted; "" when absent.
std::string OsReleaseValue(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, "=")) continue;
    if (line.size() >= 2 && (line.front() == '"' || line.front() == '\'') &&
        line.back() == line.front()) {
      line = line.substr(1, line.size() - 2);
    }
    return std::string(line);
  }
  return "";
}

}  // namespace

std::optional<L4tRelease> ParseNvTegraRelease(std::string_view whole) {
  const absl::string_view text(whole.data(), whole.size());
  absl::string_view line = text.substr(0, text.find('\n'));
  line = absl::StripAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "# R")) return std::nullopt;
  L4tRelease release;
  const size_t space = line.find(' ');
  if (space == absl::string_view::npos ||
      !absl::SimpleAtoi(line.substr(0, space), &release.major) || release.major <= 0) {
    return std::nullopt;
  }
  bool revision = false;
  for (absl::string_view field : absl::StrSplit(line.substr(space), ',')) {
    field = absl::StripAsciiWhitespace(field);
    if (absl::ConsumePrefix(&field, "REVISION:")) {
      revision = ParseRevision(absl::StripAsciiWhitespace(field), &release.minor, &release.patch);
      if (!revision) return std::nullopt;
    } else if (absl::ConsumePrefix(&field, "BOARD:")) {
      release.board = std::string(absl::StripAsciiWhitespace(field));
    }
  }
  if (!revision) return std::nullopt;
  return release;
}

std::string JetPackRelease(const L4tRelease& l4t) {
  for (const JetPackOf& j : kJetPacks) {
    if (j.major == l4t.major && j.minor == l4t.minor && j.patch == l4t.patch) return j.jetpack;
  }
  for (const auto& [major, jetpack] : kJetPackMajors) {
    if (major == l4t.major) return jetpack;
  }
  return "";
}

std::string DescribeJetson(const std::string& root) {
  const std::optional<std::string> text =
      base::ReadSmallFile((std::filesystem::path(root) / "etc/nv_tegra_release").string());
  if (!text) return "";
  const std::optional<L4tRelease> l4t = ParseNvTegraRelease(*text);
  if (!l4t) {
    // Its first line, as far as a line of `kprof info` goes.
    const absl::string_view whole(*text);
    const absl::string_view first = absl::StripAsciiWhitespace(whole.substr(0, whole.find('\n')));
    return absl::StrCat("nv_tegra_release unreadable: ", first.substr(0, 120),
                        first.size() > 120 ? "..." : "");
  }
  const std::string jetpack = JetPackRelease(*l4t);
  const std::string l4t_text = absl::StrCat("L4T R", l4t->major, ".", l4t->minor, ".", l4t->patch,
                                            l4t->board.empty() ? "" : ", board ", l4t->board);
  if (jetpack.empty()) return absl::StrCat(l4t_text, " (JetPack unknown)");
  return absl::StrCat("JetPack ", jetpack, " (", l4t_text, ")");
}

std::string DescribeOs(const std::string& root) {
  const std::filesystem::path dir(root);
  std::optional<std::string> text = base::ReadSmallFile((dir / "etc/os-release").string());
  if (!text) text = base::ReadSmallFile((dir / "usr/lib/os-release").string());
  std::string os = text ? OsReleaseValue(*text, "PRETTY_NAME") : "";
  if (os.empty() && text) {
    os = std::string(absl::StripAsciiWhitespace(
        absl::StrCat(OsReleaseValue(*text, "NAME"), " ", OsReleaseValue(*text, "VERSION"))));
  }
  if (os.empty()) os = "unknown OS";
  utsname uts{};
  if (uname(&uts) == 0) absl::StrAppend(&os, ", ", uts.sysname, " ", uts.release, " ", uts.machine);
  return os;
}

}  // namespace kprof::core
