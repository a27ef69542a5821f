// report/reader/offline_symbolizer.cpp — a trace's symbol-less frames named from its module files.
#include "report/reader/offline_symbolizer.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "trace/dwarf_symbols.h"

namespace gpumemtrace::report {
namespace {

char* g_debuginfo_path = nullptr;  // libdwfl's default search path

// As the recorder: a module's own DWARF first (libdwfl does that itself), then a separate debug
// file found locally by build id (/usr/lib/debug/.build-id, where Debian's -dbgsym packages put
// them). Never debuginfod: reading a trace makes no network requests.
const Dwfl_Callbacks kCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_build_id_find_debuginfo,
    nullptr,
    &g_debuginfo_path,
};

std::string to_hex(const unsigned char* bytes, int length) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < length; ++i) {
    hex += kHex[bytes[i] >> 4];
    hex += kHex[bytes[i] & 15];
  }
  return hex;
}

// Enough of a build id to tell two apart in a message.
std::string short_id(const std::string& hex) {
  if (hex.empty()) return "none";
  return hex.size() > 12 ? hex.substr(0, 12) + "..." : hex;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

// One module file opened: shared by every module record of the trace that names the same path and
// build id (a trace may name one file thousands of times; its debug information is loaded once).
struct OfflineSymbolizer::File {
  enum class State { Ready, Failed };
  State state = State::Failed;
  std::string failure;   // why it failed, for the warning
  Dwfl* dwfl = nullptr;  // one session per file: modules of one trace may overlap at offset 0
  Dwfl_Module* elf = nullptr;
  UnitIndex units;       // when the file has no .debug_aranges (clang's)

  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (dwfl) dwfl_end(dwfl);
  }

  // Opens `path` and checks its build id. Sets state to Ready or Failed (with `failure`).
  void open(const std::string& path, const std::string& build_id) {
    state = State::Failed;
    // O_NONBLOCK: a trace naming a FIFO or a device must not hang the analyzer (it is refused below).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      failure = errno == ENOENT ? "file is gone" : std::string("cannot open: ") + strerror(errno);
      return;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      failure = "not a regular file";
      return;
    }
    dwfl = dwfl_begin(&kCallbacks);
    if (!dwfl) {
      close(fd);
      failure = std::string("elfutils: ") + dwfl_errmsg(-1);
      return;
    }
    dwfl_report_begin(dwfl);
    // Base 0, relative to the file's own addresses: a Dwfl address is then the trace's offset
    // (ip - load bias), for shared objects and position-independent programs alike.
    elf = dwfl_report_elf(dwfl, path.c_str(), path.c_str(), fd, 0, true);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (!elf) {
      close(fd);  // consumed only on success
      failure = std::string("not an ELF file (") + dwfl_errmsg(-1) + ")";
      return;
    }
    const unsigned char* bits = nullptr;
    GElf_Addr where = 0;
    const int length = dwfl_module_build_id(elf, &bits, &where);
    const std::string on_disk = length > 0 ? to_hex(bits, length) : "";
    if (on_disk != build_id) {
      failure = "build id differs (file " + short_id(on_disk) + ", trace " + short_id(build_id) +
                ": rebuilt since, or the trace comes from another machine)";
      return;
    }
    state = State::Ready;
  }
};

struct OfflineSymbolizer::Module {
  std::string path;
  std::string build_id;  // lowercase hex, "" when the trace did not know it
  std::shared_ptr<File> file;  // null until a frame needs it
  uint64_t unnamed_frames = 0;
  bool failed() const { return file && file->state == File::State::Failed; }
};

OfflineSymbolizer::OfflineSymbolizer() = default;
OfflineSymbolizer::~OfflineSymbolizer() = default;

void OfflineSymbolizer::add_module(ModuleId id, std::string_view path, std::string_view build_id) {
  auto module = std::make_unique<Module>();
  module->path = std::string(path);
  module->build_id = lowercase(build_id);
  // A trace defines each id once; should a corrupt one redefine it, the last definition counts. Only
  // a module that failed is in failed_ (searching it for every redefinition would be quadratic).
  std::unique_ptr<Module>& slot = modules_[id];
  if (slot && slot->failed()) failed_.erase(std::remove(failed_.begin(), failed_.end(), id), failed_.end());
  slot = std::move(module);
}

bool OfflineSymbolizer::needs_symbols(const SymbolTable::Frame& frame, bool has_function) {
  return !has_function && !frame.python && frame.module && frame.offset != 0;
}

OfflineSymbolizer::Module* OfflineSymbolizer::usable(ModuleId id) {
  auto it = modules_.find(id);
  if (it == modules_.end()) return nullptr;
  Module& module = *it->second;
  if (!module.file) {
    std::shared_ptr<File>& file = files_[{module.path, module.build_id}];
    if (!file) {
      file = std::make_shared<File>();
      if (files_.size() > kMaxModuleFiles) {
        file->failure = "not opened: more than " + std::to_string(kMaxModuleFiles) +
                        " module files in one trace (the reader's limit, docs/security.md)";
      } else {
        file->open(module.path, module.build_id);
      }
    }
    module.file = file;
    if (module.failed()) failed_.push_back(id);
  }
  if (module.failed()) {
    ++module.unnamed_frames;
    return nullptr;
  }
  return &module;
}

bool OfflineSymbolizer::symbolize(SymbolTable::Frame& frame) {
  Module* module = usable(frame.module);
  if (!module) return false;
  const Symbolized s = symbolize_in_module(module->file->elf, frame.offset - 1, &module->file->units);
  frame.function = s.outer.function;
  frame.file = s.outer.file;
  frame.line = s.outer.file.empty() ? 0 : static_cast<uint32_t>(s.outer.line);
  frame.inlined.clear();
  for (const SourceLocation& call : s.inlined) {
    frame.inlined.push_back(SymbolTable::InlinedCall{call.function, call.file, static_cast<uint32_t>(call.line)});
  }
  ++frames_symbolized_;
  return true;
}

std::vector<std::string> OfflineSymbolizer::warnings() const {
  std::vector<std::string> out;
  for (ModuleId id : failed_) {
    const Module& module = *modules_.at(id);
    out.push_back("module " + module.path + ": " + module.file->failure + ": " + std::to_string(module.unnamed_frames) +
                  (module.unnamed_frames == 1 ? " frame" : " frames") + " shown as module+offset");
  }
  return out;
}

}  // namespace gpumemtrace::report
