// report/import/pickle_fuzzer.cc — libFuzzer target for the restricted pickle reader and the
// snapshot converter: any input must give either a trace or an error (an exception of the
// import's own types), never a crash, a hang, a leak
// or undefined behaviour (built with -fsanitize=fuzzer,address,undefined; tools/module.mk).
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>

#include "report/import/pickle_reader.h"
#include "report/import/snapshot_to_trace.h"

namespace {
// Discards the converted trace: the fuzzer looks for crashes, hangs and unbounded memory, and a
// hostile input may legitimately convert to up to snapshot::kExpansionOutputBase bytes.
class NullSink : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  gpumemtrace::pickle::Document doc;
  try {
    gpumemtrace::pickle::parse(bytes, &doc);
    (void)doc.dump(doc.root(), 8, 4096);
  } catch (const gpumemtrace::pickle::ParseError&) {
  }
  NullSink sink;
  std::ostream out(&sink);
  gpumemtrace::snapshot::ConvertStats stats;
  try {
    gpumemtrace::snapshot::snapshot_bytes_to_trace(std::move(bytes), "fuzz", out, &stats);
  } catch (const gpumemtrace::snapshot::SnapshotError&) {
  }
  return 0;
}
