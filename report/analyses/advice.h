// report/analyses/advice.h — one line of advice per finding, from a curated table (docs/report.md,
// "Advice"), given only when its trigger holds:
//  - OOM, fragmentation:      PyTorch blocks -> expandable segments; else allocate large buffers first;
//  - OOM, allocator limit:    name the cap to raise;
//  - OOM, other processes:    check the other processes on the device;
//  - OOM, capacity:           activations >= 50% of live memory -> smaller batch, checkpointing, mixed
//                             precision; optimizer state >= 30% -> lighter optimizer or sharding;
//                             a request larger than the device -> split it;
//  - peak:                    the same two role rules as capacity;
//  - growth of PyTorch blocks: a tensor that requires grad accumulated across iterations;
//    other growth:            memory retained every iteration;
//  - scope leak:              something outlives the scope (module-level cache, global, fixture).
#pragma once

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

void add_advice(ProcessReport& report);

}  // namespace gpumemtrace::report
