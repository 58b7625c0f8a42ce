// The executor's one decision, as a pure function: given what its worker holds and who waits,
// what to do next — start the next client's worker on one job, fill the pipeline of a client
// alone on the device, take jobs back for a client that waits, let the device go, or wait.
// The executor acts on the step and asks again until the answer is to wait.
#pragma once

#include <cstddef>
#include <vector>

namespace kprof::server {

struct PipelineView {
  bool has_worker = false;     // a client's worker has the pipeline
  bool worker_broken = false;  // it closed its end: it takes no more jobs
  bool draining = false;
  size_t depth = 1;  // jobs handed to a worker at once, at least 1
  // Each job handed on, in order (the running one first): whether it is still the worker's to
  // run — not answered already (cancelled, expired) and not being taken back.
  std::vector<bool> handed_on_live;
  size_t own_queued = 0;       // jobs of the pipeline's client in the queue
  bool others_queued = false;  // another client has a job in the queue
  bool any_queued = false;     // any client has (with no worker: whose turn is next)
  // A lease keeps the pipeline's client out: its jobs not started go back, as in a drain.
  bool leased_away = false;
};

struct PipelineStep {
  enum Kind {
    kWait,      // nothing to do until an answer, a job or a cancel comes
    kRelease,   // the pipeline is empty and the device goes to the next client (a broken
                // worker is ended)
    kStart,     // no worker has the pipeline: the next job, alone, so its worker starts on it
    kFill,      // `count` more of the client's jobs, in one write
    kTakeBack,  // the live jobs from position `count` on go back to the queue
  };
  Kind kind = kWait;
  size_t count = 0;
};

// The next step. A client alone on the device gets its pipeline filled up to `depth` once it
// is half empty; when another client waits, the jobs beyond the running one and the next are
// taken back, so the newcomer waits for two jobs at most; draining, every job not started
// is taken back.
PipelineStep NextPipelineStep(const PipelineView& view);

const char* PipelineStepName(PipelineStep::Kind kind);

}  // namespace kprof::server
