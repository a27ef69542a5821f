// report/outputs/units.h — sizes and times for people ("3.0 MiB", "1.234 s"). Sizes from people
// ("10M", "1.5GiB") are read by util/byte_size.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/format.h"

namespace gpumemtrace::report {

std::string format_bytes(uint64_t bytes);      // "512 B", "3.0 KiB", "1.5 GiB"
std::string format_seconds(uint64_t nanoseconds);  // "1.234 s", "12 ms"
std::string format_count(double n);            // rounded to a whole number: "20,038"
std::string padded(std::string text, size_t width);  // spaces up to `width`, at least one (a table's column)
std::string ratio_text(double ratio);             // two decimals: "0.85" (a fragmentation ratio)
std::string format_signed_bytes(int64_t delta);   // "+1.0 MiB", "-512 B"
std::string format_utc(uint64_t ns);           // a CLOCK_REALTIME time: "2025-09-07 14:14:17 UTC"
// "SIGTERM", "SIGINT", "SIGHUP" (the signals a footer names; Linux numbers), else "signal N".
std::string signal_name(int signal);
// How a process ended, as its footer says: "exited with status 0", "ended by _exit with status 3",
// "killed by SIGTERM", "replaced by exec" (`exit_status` < 0: not known). "" for a dump and for a
// footer that does not say: the caller words those.
std::string how_it_ended(format::End end, int exit_status, int signal);

}  // namespace gpumemtrace::report
