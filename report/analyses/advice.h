// report/analyses/advice.h — one line of advice per finding, from a curated table (docs/report.md,
// "Advice"), given only when its trigger holds:
//  - OOM, fragmentation:      PyTorch blocks -> largest tensors first, or empty the cache (a setting
//                             only from the what-if replay); holes between plain allocations ->
//                             largest buffers first, or reuse one; else allocate large buffers first;
//  - OOM, allocator limit:    name the cap to raise;
//  - OOM, other processes:    check the other processes on the device;
//  - OOM, capacity:           activations >= 50% of live memory -> smaller batch, checkpointing, mixed
//                             precision; optimizer state >= 30% -> lighter optimizer or sharding;
//                             a request larger than the device -> split it;
//  - peak:                    the same two role rules as capacity;
//  - growth of PyTorch blocks: a tensor that requires grad accumulated across iterations;
//    other growth:            memory retained every iteration;
//  - scope leak:              something outlives the scope (module-level cache, global, fixture).
// Growth wins where it is the problem: story.h gives an OOM that growth caused its growth's advice,
// and a peak made of growth a pointer to it, in place of the rules above.
#pragma once

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

void add_advice(ProcessReport& report);

}  // namespace gpumemtrace::report
