// The system a daemon runs on, in the words its users look for: the distribution (from
// /etc/os-release) and kernel, and on a Jetson board the L4T release it was flashed with (from
// /etc/nv_tegra_release) and the JetPack release that L4T release belongs to. For `kprof info`
// and the environment manifest; read once, as none of it changes while a daemon runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kprof::core {

// An L4T release as /etc/nv_tegra_release's first line gives it:
// "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: ...".
struct L4tRelease {
  int major = 0;      // 36
  int minor = 0;      // 4
  int patch = 0;      // 3
  std::string board;  // "generic"; "" when the line names none
};
// nullopt when the text is not such a line (the first of `text` is read).
std::optional<L4tRelease> ParseNvTegraRelease(std::string_view text);

// The JetPack release an L4T release ships in: "6.2" for R36.4.3, "5.1.2" for R35.4.1; for a
// revision not in the table, its major's JetPack alone ("6" for R36.5.0); "" for a major
// release this table does not know.
std::string JetPackRelease(const L4tRelease& l4t);

// "JetPack 6.2 (L4T R36.4.3, board generic)"; "L4T R39.1.0 (JetPack unknown)" past the table;
// "" off a Jetson (no nv_tegra_release under `root`); "nv_tegra_release unreadable: LINE" when
// the file is there but not understood.
std::string DescribeJetson(const std::string& root = "/");

// "Ubuntu 22.04.5 LTS, Linux 5.15.148-tegra aarch64": os-release's PRETTY_NAME under `root`
// (else NAME VERSION, else "unknown OS") and the running kernel.
std::string DescribeOs(const std::string& root = "/");

}  // namespace kprof::core
