// report/analyses/batch_replay.h — a run's requests replayed at another batch size through PyTorch's
// allocator model (allocator_model/replay.h): the run's events in their order, with their frees, each
// request's size from its fit (batch_fit.h), everything else as recorded (the segments and CUDA-level
// allocations the replay reads to know what the device could still give, the settings changes, the
// device's free-memory readings). Under the recorded settings, `overlay` over them (--what-if), and a
// margin kept free on each device.
//
// In the replays given here an event's `seq` is its index in BatchRun::records plus one (0 stays the
// replay's "at the end"), so that what the replay reports (DeviceReplay::first_new_oom_seq,
// OomOutcome::seq, Divergence::seq) names the record, and through it the request, its stack and the
// seq the trace gave it.
//
// The largest batch that fits (find_max_batch): the run fits at B when no request is refused on any
// device (no new OOM, and no recorded OOM still happening). From the template's batch, doubling up
// (or halving down) until the answer changes, then bisecting: B fits and B + 1 does not. It assumes
// that a batch fits when a larger one does (the allocator's placement could break that between two
// sizes; the search reports the pair it found).
//
// Pure: a run in, replays out. Memory: one allocator model per device and replay.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/allocator_model/replay.h"
#include "report/analyses/batch_fit.h"
#include "report/analyses/batch_runs.h"

namespace gpumemtrace::report {

// The sizes of one replay: the recorded ones (fits == nullptr), or each request's fit at `batch`
// (`spread`, `lo`, `hi`: size_at's).
struct BatchSizes {
  const SizeFits* fits = nullptr;
  double batch = 0;
  int spread = 0;
  double lo = 0, hi = 0;
};

struct BatchReplayOptions {
  std::string overlay;                  // PYTORCH_CUDA_ALLOC_CONF over the recorded settings ("": none)
  std::string recorded;                 // --recorded-settings
  struct Margin {
    uint64_t bytes = 0;
    double share = 0;  // of the most the process may hold on the device (AllocatorReplay::keep_free)
  };
  std::map<int32_t, Margin> keep_free;  // the margin, per device
  bool check = false;                   // compare with the recording (recorded sizes only)
  // End at the first request refused: the program would have raised there (as a recorded run that
  // ran out of memory ends), so nothing after it is part of the prediction.
  bool stop_at_refusal = true;
};

std::vector<allocator_model::DeviceReplay> replay_at(const BatchRun& run, const BatchSizes& sizes,
                                                     const BatchReplayOptions& options);

// True when no request was refused on any device.
bool replay_fits(const std::vector<allocator_model::DeviceReplay>& replays);

// The first request refused, over every device, or none.
struct FirstRefusal {
  bool any = false;
  int32_t device = -1;
  uint64_t record = 0;     // its index in BatchRun::records
  bool recorded = false;   // a request the recorded run was refused too (torch.oom)
  uint64_t reserved = 0;   // what the model held reserved on that device when it refused it
  uint64_t capacity = 0;   // and what it could reserve there
};
FirstRefusal first_refusal(const std::vector<allocator_model::DeviceReplay>& replays);

inline constexpr uint64_t kMaxSearchedBatch = 1000000000;  // beyond: "fits at every batch"

struct MaxBatchSearch {
  uint64_t largest = 0;     // 0: not even batch 1 fits
  bool unbounded = false;   // every batch up to kMaxSearchedBatch fits (nothing scales)
  uint64_t failing = 0;     // largest + 1, which does not fit (when bounded)
  std::vector<allocator_model::DeviceReplay> at_failing;  // the replay at `failing`
  uint64_t replays = 0;     // replays the search made
};
// `sizes.batch` is ignored: the search sets it. `start`: the batch to start from (the template's).
MaxBatchSearch find_max_batch(const BatchRun& run, BatchSizes sizes, const BatchReplayOptions& options, uint64_t start);

}  // namespace gpumemtrace::report
