#include "server/front/scheduling/pipeline_plan.h"

#include <algorithm>

namespace kprof::server {

PipelineStep NextPipelineStep(const PipelineView& view) {
  const std::vector<bool>& handed = view.handed_on_live;
  if (view.has_worker && handed.empty() &&
      (view.worker_broken || view.others_queued || view.own_queued == 0 || view.leased_away)) {
    return {PipelineStep::kRelease, 0};
  }
  if (!view.has_worker) {
    return view.any_queued ? PipelineStep{PipelineStep::kStart, 1} : PipelineStep{};
  }
  if (view.worker_broken) return {};
  if (view.draining || view.leased_away || view.others_queued) {
    // Shutting down, or a lease begins: the running job finishes, the ones behind it do not
    // start. Another client waits: it runs after the running job and at most one more.
    const size_t first = view.draining || view.leased_away ? 1 : 2;
    const bool any =
        first < handed.size() && std::any_of(handed.begin() + static_cast<std::ptrdiff_t>(first),
                                             handed.end(), [](bool live) { return live; });
    return any ? PipelineStep{PipelineStep::kTakeBack, first} : PipelineStep{};
  }
  // Filled up again once it is half empty, all at once: one frame write for several jobs.
  const size_t depth = std::max<size_t>(view.depth, 1);
  if (view.own_queued == 0 || handed.size() > depth / 2) return {};
  return {PipelineStep::kFill, std::min(depth - handed.size(), view.own_queued)};
}

const char* PipelineStepName(PipelineStep::Kind kind) {
  switch (kind) {
    case PipelineStep::kWait:
      return "wait";
    case PipelineStep::kRelease:
      return "release";
    case PipelineStep::kStart:
      return "start";
    case PipelineStep::kFill:
      return "fill";
    case PipelineStep::kTakeBack:
      return "take back";
  }
  return "?";
}

}  // namespace kprof::server
