// report/analyses/time_to_oom.h — growth turned into time: at the rate a growing site rose (growth.h),
// when would its device be full?
//
// For each growing site: bytes per step = (its highest - its first live bytes) / (new highs - 1), a
// step being one new high (one per iteration in a loop that keeps memory every iteration); the run's
// pace = the time between its first and its last new high / (new highs - 1). Memory left = the device's
// free bytes at its last reading (meminfo: the recorder's, or PyTorch's at an OOM), less what this
// process reserved since; without a reading, the device's total less what this process holds (nothing
// else assumed on the device). For a caching allocator's blocks, the allocator's free cached bytes count
// as room too. Then steps left = memory left / bytes per step, time left = steps left * pace.
// An estimate at a constant rate: it says so in every output. None for a site that holds nothing at
// the end, on a device that holds nothing then, or on a device that already had an OOM in the run.
#pragma once

#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// Fills report.time_to_oom from report.growth (already collected) and the model's device states.
void collect_time_to_oom(const MemoryModel& model, ProcessReport& report);

}  // namespace gpumemtrace::report
