// report/analyses/batch_what_if.h — "will batch 48 fit?": the peak at another batch size, and the
// largest batch that fits, from runs the user already made (docs/what-if.md, "Another batch size").
//
// From two or more runs of one program at different batch sizes (or sequence lengths): each request of
// one run, the template, is matched with the same request of the others and its size fitted as
// a + b * batch (batch_fit.h); from one run alone, the roles say what scales (an estimate). The
// template's events are then replayed at the new sizes through PyTorch's allocator model, under the
// recorded settings and each --what-if (batch_replay.h): the reserved and allocated peaks, the
// fragmentation at the reserved peak, and the first request the device would refuse. The largest batch
// that fits is searched for with a margin kept free on each device. How far to trust it: the fit's
// residual (requests whose sizes are not a straight line in the batch, and the range of the reserved
// peak that follows), the model's replay of the template against its recording, and with three runs or
// more each run predicted from the others (leave one out).
//
// The template: the run of the largest batch among those the allocator never refused (no torch.oom,
// a complete trace), else the largest.
//
// Pure: runs in, a BatchReport out. Memory: the runs (batch_runs.h) and one model per replay.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/analyses/batch_fit.h"
#include "report/analyses/batch_runs.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// A batch what-if that cannot be made from the runs given (one line, exit status 2).
class BatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BatchQuestion {
  std::vector<uint64_t> at;            // --at-batch
  bool max = false;                    // --max-batch
  uint64_t margin = 0;                 // --max-batch=SIZE: bytes kept free on each device
  double margin_share = 0;             // --max-batch=PCT%: that share of what the process may hold (a cap)
  std::vector<std::string> settings;   // --what-if (checked)
  std::string recorded;                // --recorded-settings
};

struct BatchRunInfo {
  std::string file;
  uint64_t batch = 0;
  std::string batch_from;
  uint64_t requests = 0;
  uint64_t recorded_ooms = 0;
  bool complete = false;
  bool is_template = false;
};

// A request the model refused.
struct BatchRefusal {
  int32_t device = -1;
  uint64_t request = 0;      // its index among the template's requests
  uint64_t seq = 0;          // the template's event
  uint64_t time_ns = 0;
  uint64_t requested = 0;    // at the batch replayed
  uint64_t reserved = 0;     // the model's reserved bytes then
  uint64_t capacity = 0;     // what it could reserve
  bool recorded = false;     // the template's own run was refused it too
  Stack stack;
};

// One replay of the template at one batch under one setting, on one device: up to the first request
// refused on any device (the run would end there), the template's own sizes to its end.
struct BatchRow {
  std::string settings;          // over the recorded settings ("": the recorded settings)
  uint64_t batch = 0;
  bool recorded_sizes = false;   // the template's own batch: its recorded sizes
  uint64_t reserved_peak = 0;
  uint64_t allocated_peak = 0;
  FragmentationPoint at_peak;    // at the reserved peak
  uint64_t cache_flushes = 0;
  uint64_t retries = 0;
  bool has_range = false;        // the fit is not exact: the reserved peak lies in [low, high]
  uint64_t reserved_low = 0, reserved_high = 0;
  uint64_t capacity = 0;         // what the model could reserve at the end (0: not known)
  bool refused = false;          // the device would refuse a request: `refusal`, where the run would end
  BatchRefusal refusal;
  std::vector<TimelineSample> timeline;  // reserved bytes over the template's time, bounded
};

struct BatchDevice {
  int32_t device = -1;
  uint64_t total = 0;            // the device's memory (0: not in the trace)
  uint64_t capacity = 0;         // what PyTorch could reserve, in the template's replay (0: not known)
  // The template replayed at its own sizes under its recorded settings, against its recording.
  bool faithful = false;
  uint64_t divergence_seq = 0;
  std::string divergence;
  uint64_t recorded_reserved_peak = 0;
  std::vector<BatchRow> rows;    // per setting, the template's batch first, then each --at-batch
};

struct BatchMax {
  std::string settings;
  uint64_t margin = 0;           // bytes kept free (on the device that refused, for a share)
  bool capacity_unknown = false; // a device whose memory the trace does not give: no search
  uint64_t largest = 0;          // 0: not even batch 1 fits
  bool unbounded = false;        // nothing scales with the batch: every batch fits as well as one
  uint64_t failing = 0;          // largest + 1
  BatchRefusal refusal;          // where `failing` runs out
  bool has_range = false;        // the fit is not exact: the largest batch lies in [low, high]
  uint64_t largest_low = 0, largest_high = 0;
  uint64_t replays = 0;
};

// A run predicted from the others (three runs or more).
struct BatchCheck {
  std::string file;
  uint64_t batch = 0;
  std::string template_file;
  int32_t device = -1;
  uint64_t predicted = 0;        // reserved peak predicted from the others
  uint64_t replayed = 0;         // the model's replay of the run's own requests
  uint64_t recorded = 0;         // what the run's allocator reserved (its segment events)
  bool refused_predicted = false, refused_replayed = false;
};

struct BatchSite {
  Stack stack;
  int32_t device = -1;
  uint64_t requests = 0;
  bool same_line = true;
  double a = 0, b = 0;
  double residual = 0;
  RequestFit::Kind kind = RequestFit::Unmatched;
  Role role = Role::Other;
};

struct BatchReport {
  std::vector<BatchRunInfo> runs;
  std::string template_file;
  uint64_t template_batch = 0;
  bool estimate = false;         // one run: the roles say what scales
  uint64_t requests = 0;         // the template's
  uint64_t scales = 0, constant = 0, by_site = 0, unmatched = 0, not_linear = 0;
  double max_residual = 0;
  size_t batches = 0;
  bool linearity_checked = false;
  std::vector<BatchSite> sites;  // every template site, largest slope first
  std::vector<BatchDevice> devices;
  std::vector<BatchMax> max;     // per setting, with --max-batch
  std::vector<BatchCheck> leave_one_out;
};

// Each run's batch: `given` (--batch-of, by file as given), else its marks, else its file name.
// Throws BatchError naming a run whose batch is not known, marks that disagree, two runs of one batch.
void assign_batches(std::vector<BatchRun>& runs, const std::map<std::string, uint64_t>& given);

// Throws BatchError when the runs cannot answer (no PyTorch request in the template).
BatchReport batch_what_if(const std::vector<BatchRun>& runs, const BatchQuestion& question);

// The predicted rows join the template's what-if table (ProcessReport::what_if, WhatIfRow::batch), on
// each device whose replay matched its recording: a table without figures gets none.
void add_batch_rows(const BatchReport& batch, std::vector<ProcessReport>& reports);

}  // namespace gpumemtrace::report
