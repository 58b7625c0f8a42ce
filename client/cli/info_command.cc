// kprof info: what the daemon is and has — devices, collectors, limits, queues, modules.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "client/cli/command.h"
#include "client/cli/output.h"

namespace kprof::client {
namespace {

// The CSV's header; with a target column first when several daemons are listed.
void PrintCsvHeader(bool targets) {
  PrintF("%sdevice,type,name,cpus,queue_length,busy,jobs_completed,jobs_failed\n",
         targets ? "target," : "");
}

// One row per device; `target` first when it is not "".
void PrintCsv(const kprof::v1::GetInfoResponse& info, const std::string& target) {
  if (target.empty()) PrintCsvHeader(false);
  for (const auto& d : info.devices()) {
    if (!target.empty()) PrintF("%s,", target.c_str());
    PrintF("%s,%s,\"%s\",%d,%d,%d,%lld,%lld\n", d.device().c_str(), d.type().c_str(),
           d.cpu_model().c_str(), d.cpus(), d.queue_length(), d.busy() ? 1 : 0,
           static_cast<long long>(d.jobs_completed()), static_cast<long long>(d.jobs_failed()));
  }
}

void PrintTable(const kprof::v1::GetInfoResponse& info) {
  PrintF("kprofd %s on %s\nbuild: %s\n", info.version().c_str(), info.host().c_str(),
         info.build().c_str());
  if (!info.os().empty()) PrintF("os: %s\n", info.os().c_str());
  if (!info.jetson().empty()) PrintF("jetson: %s\n", info.jetson().c_str());
  PrintF("\n");
  for (const auto& d : info.devices()) {
    PrintF("%s  %s%s\n  cpus: %d   queue: %d%s   jobs: %lld done, %lld failed\n",
           d.device().c_str(), d.name().c_str(),
           d.cpu_model().empty() ? "" : (" (" + d.cpu_model() + ")").c_str(), d.cpus(),
           d.queue_length(), d.busy() ? " (busy)" : "", static_cast<long long>(d.jobs_completed()),
           static_cast<long long>(d.jobs_failed()));
    if (!d.compute_capability().empty()) {
      PrintF(
          "  sm_%s, %d SMs, %llu MiB, L2 %d KiB, %d MHz; memory %d MHz x %d bits (peak %.0f "
          "GB/s); PCI %s; driver CUDA %s\n",
          absl::StrReplaceAll(d.compute_capability(), {{".", ""}}).c_str(), d.multiprocessors(),
          static_cast<unsigned long long>(d.memory_bytes() >> 20), d.l2_bytes() >> 10,
          d.clock_mhz(), d.memory_clock_mhz(), d.memory_bus_bits(), d.peak_bandwidth_gbps(),
          d.pci_bus_id().c_str(), d.driver_version().c_str());
    }
    if (d.has_lease()) {
      const kprof::v1::LeaseInfo& lease = d.lease();
      // The lease's id is shown to its holder alone (under the lease): none for the others.
      PrintF(
          "  leased to %s until %s%s%s\n", lease.holder().c_str(),
          absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(lease.ends_unix_ms()),
                           absl::UTCTimeZone())
              .c_str(),
          lease.lease_id().empty() ? "" : absl::StrCat(" (lease ", lease.lease_id(), ")").c_str(),
          lease.clocks_locked() ? ", clocks locked" : "");
    }
    if (d.busy() || d.queued_size() > 0) {
      std::string queue;
      for (const auto& q : d.queued()) {
        absl::StrAppend(&queue, queue.empty() ? "" : ", ", q.client(), " ", q.jobs());
      }
      PrintF("  running: %s; queued: %s\n",
             d.running_client().empty() ? "nothing" : d.running_client().c_str(),
             queue.empty() ? "nothing" : queue.c_str());
    }
    for (const auto& c : d.collectors()) {
      const std::string metrics = c.metrics().empty() ? "no preset events; native events by name"
                                                      : absl::StrJoin(c.metrics(), ", ");
      PrintF("  collector %s: %s\n", c.name().c_str(),
             c.available() ? metrics.c_str() : ("unavailable: " + c.reason()).c_str());
      // What it knows but cannot count here, grouped by why.
      std::vector<std::pair<std::string, std::vector<std::string>>> why_not;
      for (const auto& u : c.uncountable()) {
        auto same = std::find_if(why_not.begin(), why_not.end(),
                                 [&](const auto& w) { return w.first == u.reason(); });
        if (same == why_not.end()) same = why_not.insert(why_not.end(), {u.reason(), {}});
        same->second.push_back(u.name());
      }
      for (const auto& [reason, names] : why_not) {
        PrintF("    not countable here: %s: %s\n", absl::StrJoin(names, ", ").c_str(),
               reason.c_str());
      }
      for (const auto& component : c.components()) {
        PrintF("    component %s: %s\n", component.name().c_str(),
               component.enabled() ? "enabled" : ("disabled: " + component.reason()).c_str());
      }
    }
  }
  PrintF("\ncuda: %s\n", info.cuda().c_str());
  if (!info.isolation().empty()) PrintF("isolation: %s\n", info.isolation().c_str());
  if (!info.metrics().empty()) PrintF("metrics: http://%s/metrics\n", info.metrics().c_str());
  const auto& l = info.limits();
  PrintF("\nlimits: module %s, cache %s, arguments %s, queue %d, job timeout %gs\n\nmodules:\n",
         base::FormatByteSize(l.max_module_bytes()).c_str(),
         base::FormatByteSize(l.max_cache_bytes()).c_str(),
         base::FormatByteSize(l.max_argument_bytes()).c_str(), l.max_queue(),
         l.job_timeout_seconds());
  for (const auto& m : info.modules()) {
    PrintF("  %-64s  %s (%s)\n", m.id().c_str(), m.name().c_str(),
           absl::StrJoin(m.functions(), ", ").c_str());
  }
  if (info.more_modules()) PrintF("  ... and more: `kprof modules` lists them all\n");
}

class InfoCommand final : public Command {
 public:
  explicit InfoCommand(CLI::App& app)
      : Command(app, "info", "devices, collectors, limits, queues, loaded modules") {}

  absl::Status Run(const Globals& globals, const std::string& format, int*) override {
    KPROF_ASSIGN_OR_RETURN(const std::vector<std::string> daemons, globals.Daemons());
    if (daemons.size() == 1) {
      KPROF_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, globals.Connect());
      KPROF_ASSIGN_OR_RETURN(kprof::v1::GetInfoResponse info, client->Info());
      if (format == "json") {
        Print(ProtoJson(info));
      } else if (format == "csv") {
        PrintCsv(info, "");
      } else {
        PrintTable(info);
      }
      return absl::OkStatus();
    }
    // Several daemons: each in turn, asked at once; one that does not answer is said so, and
    // the command fails once the others are printed.
    auto answers = globals.AskInfo(daemons);
    std::vector<std::string> failed;
    Json all = Json::array();
    if (format == "csv") PrintCsvHeader(true);
    for (size_t i = 0; i < daemons.size(); ++i) {
      const absl::StatusOr<kprof::v1::GetInfoResponse> info = answers[i].get();
      if (!info.ok()) {
        const std::string why = StatusLine(info.status());
        failed.push_back(absl::StrCat(daemons[i], ": ", why));
        all.push_back({{"target", daemons[i]}, {"error", why}});
        if (format == "table") PrintF("== %s: %s\n\n", daemons[i].c_str(), why.c_str());
        continue;
      }
      if (format == "json") {
        Json one = {{"target", daemons[i]}};
        one.update(Json::parse(ProtoJson(*info)));
        all.push_back(std::move(one));
      } else if (format == "csv") {
        PrintCsv(*info, daemons[i]);
      } else {
        PrintF("== %s\n", daemons[i].c_str());
        PrintTable(*info);
        PrintF("\n");
      }
    }
    if (format == "json") Print(Json{{"daemons", all}}.dump(1) + "\n");
    if (!failed.empty()) {
      return absl::UnavailableError(
          absl::StrCat(failed.size(), " of ", daemons.size(),
                       " daemons did not answer: ", absl::StrJoin(failed, "; ")));
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Command> AddInfoCommand(CLI::App& app) {
  return std::make_unique<InfoCommand>(app);
}

}  // namespace kprof::client
