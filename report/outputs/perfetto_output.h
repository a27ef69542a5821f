// report/outputs/perfetto_output.h — `--format perfetto`: the Trace Event Format (JSON Object Format,
// "traceEvents") that ui.perfetto.dev and chrome://tracing open, so GPU memory shows beside a
// torch.profiler or Nsight trace. Per process: a counter track per device (reserved and allocated
// bytes, from the model's downsampled timeline), instant events for OOMs / failed allocations and
// marks, and a slice per phase (from one mark to the next). docs/report.md describes it.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// Events sorted by ts (microseconds of the trace's clock), metadata events first.
nlohmann::json perfetto_trace(const std::vector<ProcessReport>& reports);

}  // namespace gpumemtrace::report
