// tests/unit/report_offline_symbolizer_test.cpp — the offline symbolizer's refusals
// (report/reader/offline_symbolizer.h): which frames it looks up, and module files it must not use
// (gone, a FIFO, not ELF), each warned about once with the number of frames left unnamed.
// Naming frames from a real module is checked end to end in tests/report/test_report_offline_symbols.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "report/reader/offline_symbolizer.h"
#include "trace/dwarf_symbols.h"

using namespace gpumemtrace::report;

namespace {

SymbolTable::Frame native_frame(uint32_t module, uint64_t offset) {
  SymbolTable::Frame frame;
  frame.module = ModuleId(module);
  frame.offset = offset;
  frame.ip = 0x7f0000000000 + offset;
  return frame;
}

std::string temp_path(const char* name) {
  return (testing::TempDir().empty() ? std::string("/tmp/") : testing::TempDir()) + name + "." +
         std::to_string(getpid());
}

TEST(OfflineSymbolizer, LooksUpOnlyNativeFramesTheTraceDidNotName) {
  EXPECT_TRUE(OfflineSymbolizer::needs_symbols(native_frame(1, 0x1234), false));
  EXPECT_FALSE(OfflineSymbolizer::needs_symbols(native_frame(1, 0x1234), true));  // "function" given, even ""
  EXPECT_FALSE(OfflineSymbolizer::needs_symbols(native_frame(0, 0x1234), false));  // no module
  EXPECT_FALSE(OfflineSymbolizer::needs_symbols(native_frame(1, 0), false));       // no offset
  SymbolTable::Frame python = native_frame(1, 0x1234);
  python.python = true;
  EXPECT_FALSE(OfflineSymbolizer::needs_symbols(python, false));
}

TEST(OfflineSymbolizer, MissingFileIsOneWarningWithItsFrameCount) {
  OfflineSymbolizer symbolizer;
  symbolizer.add_module(ModuleId(3), "/nonexistent/gpumemtrace/libgone.so", "ab12");
  for (uint64_t offset : {0x1000, 0x2000, 0x3000}) {
    SymbolTable::Frame frame = native_frame(3, offset);
    EXPECT_FALSE(symbolizer.symbolize(frame));
    EXPECT_EQ(frame.function, "");
    EXPECT_EQ(frame.offset, offset);
  }
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_EQ(symbolizer.warnings()[0],
            "module /nonexistent/gpumemtrace/libgone.so: file is gone: 3 frames shown as module+offset");
  EXPECT_EQ(symbolizer.frames_symbolized(), 0u);
}

TEST(OfflineSymbolizer, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = temp_path("offline_symbolizer_fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  OfflineSymbolizer symbolizer;
  symbolizer.add_module(ModuleId(1), fifo, "");
  SymbolTable::Frame frame = native_frame(1, 0x10);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(symbolizer.symbolize(frame));  // a blocking open would wait here for a writer forever
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  unlink(fifo.c_str());
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_NE(symbolizer.warnings()[0].find("not a regular file: 1 frame shown"), std::string::npos)
      << symbolizer.warnings()[0];
}

TEST(OfflineSymbolizer, NotElfAndUnknownModules) {
  const std::string text = temp_path("offline_symbolizer_text");
  std::ofstream(text) << "not an ELF file\n";
  OfflineSymbolizer symbolizer;
  symbolizer.add_module(ModuleId(1), text, "");
  SymbolTable::Frame frame = native_frame(1, 0x10);
  EXPECT_FALSE(symbolizer.symbolize(frame));
  SymbolTable::Frame unknown = native_frame(9, 0x10);  // no module record: nothing to open, nothing to say
  EXPECT_FALSE(symbolizer.symbolize(unknown));
  unlink(text.c_str());
  ASSERT_EQ(symbolizer.warnings().size(), 1u);
  EXPECT_NE(symbolizer.warnings()[0].find(text + ": not an ELF file"), std::string::npos) << symbolizer.warnings()[0];
}

}  // namespace

// trace/dwarf_symbols.h demangle(), which names the frames of both the writer and the offline
// symbolizer: a C function whose name is a type's encoding is named as it is (issue 20: `v` became
// "void", and `leak:v` / `--user-code v` no longer matched it).
TEST(Demangle, OnlyMangledNamesAreDemangled) {
  for (const char* c_name : {"v", "f", "i", "w", "d", "St", "Ss"}) EXPECT_EQ(gpumemtrace::demangle(c_name), c_name);
  EXPECT_EQ(gpumemtrace::demangle("_Z1fv"), "f()");
  EXPECT_EQ(gpumemtrace::demangle("_ZN2ns5trainEi"), "ns::train(int)");
  EXPECT_EQ(gpumemtrace::demangle("_Zgarbage"), "_Zgarbage");  // not demangleable: as it is
  EXPECT_EQ(gpumemtrace::demangle(nullptr), "");
}
