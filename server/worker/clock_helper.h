// kprofd-worker --clocks: the daemon's hands for a lease's clocks. NVML and the CUDA driver are
// never loaded into kprofd itself, so a lease's clocks are locked, recorded and put back by this
// short-lived process, which runs as the daemon's user (not sandboxed: it writes /sys):
//
//   kprofd-worker --clocks lock|record --device D --state FILE [--mhz N] [--sysfs-root DIR]
//   kprofd-worker --clocks restore --state FILE
//
// It writes one JSON object to stdout — {"locked", "note", "settings": [{"name", "before",
// "during"}]} or {"restored": "..."}; on an error {"error": {"code", "message"}} — and exits 0.
#pragma once

namespace kprof::server {

// main() for --clocks (argv[1]).
int RunClockHelper(int argc, char** argv);

}  // namespace kprof::server
