// report/import/snapshot2trace_main.cc — `gpumem-snapshot2trace SNAPSHOT OUT.jsonl`: converts a
// PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into a gpumemtrace timeline.
// OUT may be "-" for stdout. Exit status: 0 converted, 2 bad usage or bad input (one line on stderr).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "report/import/snapshot_to_trace.h"

namespace {
const char kUsage[] =
    "usage: gpumem-snapshot2trace SNAPSHOT.pickle OUT.jsonl|-\n"
    "Converts a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into a gpumemtrace\n"
    "trace (docs/trace-format.md, \"PyTorch snapshot import\"). The pickle is read with a restricted\n"
    "reader: only plain data is accepted, anything that could run code is rejected (exit 2).\n";
}

int main(int argc, char** argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "gpumem-snapshot2trace: expected SNAPSHOT and OUT (see --help)\n");
    return 2;
  }
  const std::string in = argv[1], out_path = argv[2];
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (out_path != "-") {
    file.open(out_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      fprintf(stderr, "gpumem-snapshot2trace: %s: cannot create: %s\n", out_path.c_str(), strerror(errno));
      return 2;
    }
    out = &file;
  }
  gpumemtrace::snapshot::ConvertStats stats;
  try {
    gpumemtrace::snapshot::snapshot_to_trace(in, *out, &stats);
    out->flush();
    if (!*out) throw gpumemtrace::snapshot::SnapshotError(in, "write error");
  } catch (const gpumemtrace::snapshot::SnapshotError& error) {
    fprintf(stderr, "gpumem-snapshot2trace: %s: %s\n", in.c_str(), error.message().c_str());
    if (file.is_open()) {
      file.close();
      remove(out_path.c_str());
    }
    return 2;
  }
  for (const auto& w : stats.warnings) fprintf(stderr, "gpumem-snapshot2trace: %s: warning: %s\n", in.c_str(), w.c_str());
  fprintf(stderr,
          "gpumem-snapshot2trace: %s: %llu segments, %llu history entries -> %llu events "
          "(%llu initial segments, %llu initial blocks, %llu entries ignored, %llu inconsistencies)\n",
          in.c_str(), (unsigned long long)stats.segments, (unsigned long long)stats.trace_entries,
          (unsigned long long)stats.events, (unsigned long long)stats.initial_segments,
          (unsigned long long)stats.initial_blocks, (unsigned long long)stats.ignored_entries,
          (unsigned long long)stats.inconsistencies);
  return 0;
}
