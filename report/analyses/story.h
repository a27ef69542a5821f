// report/analyses/story.h — the story of a run: what ended it, what caused that, and the one thing
// to do about it, so that the report reads in that order and its findings never contradict each
// other (docs/report.md, "The story of a run").
//
//  - The run ended in an out-of-memory error (ProcessReport::ended_in_oom) when an OOM incident was
//    the last thing it did on any device (nothing was allocated after its last attempt) and its end
//    says it failed: a non-zero exit status, a signal, or a cut trace. The crash is that incident.
//    What was live then is "live when it crashed", never a leak (ended_early()).
//  - A PyTorch snapshot whose history ends in an OOM incident (nothing allocated after it) was taken
//    at that OOM (ProcessReport::taken_at_oom), as `_dump_snapshot()` in an OOM observer or an except
//    handler takes it: its story opens with that OOM as a crashed run's does, and each rule below that
//    speaks of a run that ended in an OOM holds for it; it is worded as a snapshot taken there, never
//    as the run's end (a snapshot does not say how the run ended).
//  - The cause of an OOM (capacity, or the allocator's limit) is the growing site (growth.h) of its
//    device and level that held the most among the OOM's top holders, when what it gained since its
//    first high is at least what the request was short of: without that growth, the request would
//    have fit. Its advice is then the OOM's one advice, in place of the verdict's (role advice such
//    as "a smaller batch" would only postpone the OOM).
//  - In a run that ended in an OOM, the crash's advice is the one advice of its device: the peak of
//    that device gives none of its own.
//  - A peak of which growing sites hold at least a quarter points to the growth instead of giving role
//    advice (an allocator setting the what-if replay shows saves reserved bytes is still added); a
//    what-if headroom estimate ("a batch that much larger") is dropped on a device that ran out of
//    memory (its batch did not fit) or whose peak is made of growth. An OOM with a cause keeps its
//    growth's advice over a setting the replay names.
//  - A time-to-OOM forecast of a site whose device ran out of memory after the site's last rise is
//    dropped: the OOM it forecasts has happened.
// Pure functions of the report; no I/O.
#pragma once

#include <cstdint>
#include <vector>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// Sets report.ended_in_oom (report.taken_at_oom for a snapshot) and report.crash_oom (report.ooms must
// be filled); `last_acquire_ns`: when the process last acquired memory (an allocation or a block that
// succeeded), 0 for never.
void find_oom_crash(ProcessReport& report, uint64_t last_acquire_ns);

// After add_advice (advice.h): causes, the one advice of each OOM, the peaks' advice, forecasts.
void tell_story(ProcessReport& report);

// After the what-if replays (what_if.h): where the device ran out of memory or growth is the problem,
// no headroom estimate, and the growth's advice over a setting the replays named for an OOM it caused.
void reconcile_what_if(ProcessReport& report);

// The sections of a process's report in the order they are told. Text and JSON name the same order.
enum class Section { Ooms, Leaks, HeldAtExit, Scopes, Peaks, FailedCalls, Growth, TimeToOom, WhatIf };
std::vector<Section> story_order(const ProcessReport& report);
const char* section_key(Section section);  // the JSON key of the section ("ooms", "leaks", ...)

// The OOM incidents in the order they are told: the crash first, then the others in time order.
std::vector<const OomReport*> ooms_in_story_order(const ProcessReport& report);

}  // namespace gpumemtrace::report
