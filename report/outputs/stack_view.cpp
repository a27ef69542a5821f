// report/outputs/stack_view.cpp — the text report's view of a stack: classification of frames,
// folding, C++ name shortening and line fitting (see stack_view.h).
#include "report/outputs/stack_view.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "report/analyses/suppressions.h"

namespace gpumemtrace::report {

const char* const kInterpreterGroup = "python interpreter";

namespace {

constexpr const char* kTorchGroup = "torch internals";
constexpr const char* kPytestGroup = "pytest internals";
constexpr const char* kStdlibGroup = "python stdlib";
constexpr const char* kCxxStdGroup = "C++ standard library";
constexpr const char* kUnknownGroup = "unknown code";
// A name cut to fit the width keeps at least this many characters before its "...".
constexpr size_t kMinNameChars = 12;

bool starts_with(const std::string& text, const char* prefix) {
  return text.compare(0, std::strlen(prefix), prefix) == 0;
}

bool starts_with_any(const std::string& text, std::initializer_list<const char*> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const char* p) { return starts_with(text, p); });
}

bool contains_any(const std::string& text, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](const char* p) { return text.find(p) != std::string::npos; });
}

// Windows paths (a snapshot recorded on Windows: `D:\proj\.venv\Lib\site-packages\torch\...`) are
// judged as their POSIX spelling.
std::string forward_slashes(std::string path) {
  std::replace(path.begin(), path.end(), '\\', '/');
  return path;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

bool has_symbol(const LogicalFrame& frame) { return !frame.function.empty() && frame.function != "??"; }

// The symbol without its version and without the suffix a compiler gives the copies it makes of a
// function (GCC's `.cold`, `.localalias`, `.lto_priv.2`, `.constprop.0`, `.isra.0`, `.part.0`; LLVM's
// `.llvm.123`): `__libc_start_main@@GLIBC_2.34` -> `__libc_start_main`, `Py_RunMain.localalias` ->
// `Py_RunMain`. For C symbols: a C++ or Python name keeps its dots only where these are not.
std::string unversioned(const std::string& function) {
  size_t end = function.find('@');
  for (const char* suffix : {".cold", ".localalias", ".lto_priv", ".constprop", ".isra", ".part", ".llvm."}) {
    end = std::min(end, function.find(suffix));
  }
  return function.substr(0, end);
}

// --- classification --------------------------------------------------------------------------

// The package a path lies in under site-packages or dist-packages (`torch`, `six` for six.py), or "".
std::string package_of(const std::string& native_path) {
  const std::string path = forward_slashes(native_path);
  for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
    size_t at = path.rfind(dir);
    if (at == std::string::npos) continue;
    size_t start = at + std::strlen(dir);
    size_t slash = path.find('/', start);
    std::string name = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (slash == std::string::npos) name = name.substr(0, name.find('.'));  // six.py, _foo.cpython-311-...so
    return name.empty() ? std::string("site-packages") : name;
  }
  return "";
}

// pytest runs a test through three packages of its own (pytest, _pytest, and its plugin manager
// pluggy), interleaved: one machine to the reader of a test's stack, so one fold line, not three.
std::string package_group(const std::string& package) {
  if (package == "torch") return kTorchGroup;
  if (package == "pytest" || package == "_pytest" || package == "pluggy") return kPytestGroup;
  return package + " internals";
}

FrameClass library(std::string group) { return FrameClass{FrameRole::Library, std::move(group)}; }

bool is_interpreter_function(const std::string& symbol) {
  const std::string function = unversioned(symbol);
  // The C API and the interpreter's own functions: Py_*, PyEval_*, PyObject_*, _Py*.
  if (function.size() > 2 && starts_with(function, "Py") &&
      (std::isupper(static_cast<unsigned char>(function[2])) || function[2] == '_')) {
    return true;
  }
  // CPython's static functions, as PyTorch's snapshots name them (ceval.c, call.c, typeobject.c,
  // bltinmodule.c, _threadmodule.c): by prefix where the prefix is CPython's convention, else whole.
  if (starts_with_any(function, {"_Py", "_ctypes_", "ffi_call", "ffi_closure", "_call_function_pointer",
                                 "cfunction_call", "cfunction_vectorcall", "method_vectorcall", "slot_tp_",
                                 "slot_nb_", "slot_sq_", "slot_mp_", "builtin_", "vectorcall_", "pymain_",
                                 "run_mod", "run_eval_code_obj", "pyrun_"})) {
    return true;
  }
  for (const char* name : {"do_call_core", "call_function", "type_call", "binary_op", "binary_op1", "object_vacall",
                           "wrapperdescr_call", "function_code_fastcall", "partial_call", "partial_vectorcall",
                           "property_descr_get", "thread_run", "pythread_wrapper"}) {
    if (function == name) return true;
  }
  return false;
}

// A file of CPython's own source tree (`/usr/local/src/conda/python-3.10.16/Python/ceval.c`,
// `.../Objects/call.c`, `.../Include/internal/pycore_ceval.h`): one of its top folders below a
// folder whose name says Python.
bool is_cpython_source(const std::string& native_path) {
  const std::string path = forward_slashes(native_path);
  if (!(path.size() > 2 && (path.compare(path.size() - 2, 2, ".c") == 0 || path.compare(path.size() - 2, 2, ".h") == 0))) {
    return false;
  }
  for (const char* dir : {"/Python/", "/Objects/", "/Modules/", "/Include/", "/Parser/", "/Programs/"}) {
    size_t at = path.find(dir);
    if (at == std::string::npos) continue;
    std::string above = path.substr(0, at);
    std::transform(above.begin(), above.end(), above.begin(), [](unsigned char c) { return std::tolower(c); });
    if (above.find("python") != std::string::npos) return true;
  }
  return false;
}

// The standard library of a Windows installation (`C:\Python311\Lib\runpy.py`); site-packages is
// judged before.
bool is_windows_stdlib(const std::string& path) {
  return path.find('\\') != std::string::npos && forward_slashes(path).find("/Lib/") != std::string::npos;
}

FrameClass classify_python(const LogicalFrame& frame) {
  if (is_internal_frame(frame)) return FrameClass{FrameRole::Hidden, ""};
  std::string package = package_of(frame.file);
  if (!package.empty()) return library(package_group(package));
  // The standard library: <frozen importlib._bootstrap>, /usr/lib/python3.11/threading.py.
  if (starts_with(frame.file, "<frozen ") || contains_any(frame.file, {"/lib/python2", "/lib/python3"}) ||
      is_windows_stdlib(frame.file)) {
    return library(kStdlibGroup);
  }
  return FrameClass{};
}

FrameClass classify_native(const LogicalFrame& frame) {
  if (is_internal_frame(frame)) return FrameClass{FrameRole::Hidden, ""};
  if (frame.module.empty()) {
    // PyTorch snapshots' C++ frames and unresolved addresses carry no module: judge by the name.
    if (!has_symbol(frame)) return library(kUnknownGroup);
    if (is_interpreter_function(frame.function) || is_cpython_source(frame.file)) return library(kInterpreterGroup);
    if (starts_with_any(frame.function, {"c10::", "at::", "torch::", "caffe2::"})) return library(kTorchGroup);
    if (starts_with_any(frame.function, {"std::", "__gnu_cxx::", "__cxxabiv1::"})) return library(kCxxStdGroup);
    return FrameClass{};
  }
  const std::string& path = frame.module;
  std::string module = basename_of(path);
  if (starts_with_any(module, {"libpython", "python", "libffi", "_ctypes"})) return library(kInterpreterGroup);
  if (starts_with_any(module, {"libcublas", "libcudnn", "libnccl", "libcufft", "libcurand", "libcusparse",
                               "libcusolver", "libcutensor", "libnvrtc", "libnvJitLink", "libnvToolsExt",
                               "libnvblas", "libnvidia-", "libnpp", "libcufile", "libnvjpeg"})) {
    return library(module);
  }
  if (starts_with_any(module, {"libtorch", "libc10", "libshm", "libcaffe2"})) return library(kTorchGroup);
  std::string package = package_of(path);
  if (!package.empty()) return library(package_group(package));
  // An executable (no ".so" in its name): the program itself. The interpreter was judged above.
  if (module.find(".so") == std::string::npos) return FrameClass{};
  // Shared libraries installed by the system, a package manager or a Python environment.
  if (starts_with_any(path, {"/lib/", "/lib64/", "/usr/", "/opt/", "/nix/store/", "/snap/"}) ||
      contains_any(path, {"conda", "/envs/", "venv/", "/.pyenv/", "/.local/lib/"}) ||
      starts_with_any(module, {"libc.so", "libc-", "libm.so", "libm-", "libstdc++", "libgcc_s", "libpthread",
                               "libdl.so", "libdl-", "ld-linux", "librt.so", "libgomp", "libiomp", "libomp",
                               "libz.so", "libtcmalloc", "libjemalloc"})) {
    return library(module);
  }
  return FrameClass{};  // the program's own shared libraries
}

FrameClass builtin_class(const LogicalFrame& frame) {
  return frame.python ? classify_python(frame) : classify_native(frame);
}

// The length of the longest pattern that matches the frame's function, file or module (0: none).
size_t longest_match(const std::vector<std::string>& patterns, const LogicalFrame& frame,
                     const std::string** matched) {
  size_t longest = 0;
  for (const std::string& pattern : patterns) {
    if (pattern.size() <= longest) continue;
    if (suppression_matches(pattern, frame.function) || suppression_matches(pattern, frame.file) ||
        suppression_matches(pattern, frame.module)) {
      longest = pattern.size();
      if (matched) *matched = &pattern;
    }
  }
  return longest;
}

// --- C++ names -------------------------------------------------------------------------------

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// True when `operator` as a whole word starts at name[i].
bool operator_keyword_at(const std::string& name, size_t i) {
  static const size_t kLength = std::strlen("operator");
  return name.compare(i, kLength, "operator") == 0 && (i == 0 || !is_identifier_char(name[i - 1])) &&
         (i + kLength == name.size() || !is_identifier_char(name[i + kLength]));
}

// True when the '<' or '>' at name[i] belongs to an operator's name (`operator<`, `operator->`,
// `operator>>=`), not to a template argument list (`Bar<&Foo::operator<>`).
bool in_operator_symbol(const std::string& name, size_t i) {
  static const size_t kLength = std::strlen("operator");
  for (size_t back = 0; back <= 2 && back <= i; ++back) {
    size_t start = i - back;
    if (back > 0 && std::strchr("<>-=", name[start]) == nullptr) break;
    std::string symbol = name.substr(start, back + 1);
    bool known = symbol == "<" || symbol == ">" || symbol == "<<" || symbol == ">>" || symbol == "<=" ||
                 symbol == ">=" || symbol == "->" || symbol == "<<=" || symbol == ">>=" || symbol == "<=>";
    if (known && start >= kLength && operator_keyword_at(name, start - kLength)) return true;
  }
  return false;
}

// The operator's own symbol right after the keyword: `()`, `[]`, or up to 3 operator characters
// (`<=>`, `->*`, `<<=`). 0 for conversion operators, `new`, `delete`.
size_t operator_symbol_length(const std::string& name, size_t i) {
  if (name.compare(i, 2, "()") == 0 || name.compare(i, 2, "[]") == 0) return 2;
  size_t n = 0;
  while (n < 3 && i + n < name.size() && std::strchr("+-*/%^&|~!=<>,", name[i + n]) != nullptr) ++n;
  return n;
}

// The index just past the bracket group that opens at name[i] ('<', '(', '[' or '{'), or npos
// when it is not closed. Angle brackets are not counted inside parentheses (function types in
// template arguments) nor where they belong to an operator's name.
size_t skip_group(const std::string& name, size_t i) {
  std::string closers;
  for (; i < name.size(); ++i) {
    char c = name[i];
    bool angles = (c == '<' || c == '>') && (closers.empty() || closers.back() != ')') &&
                  !in_operator_symbol(name, i);
    if (c == '(') closers += ')';
    else if (c == '[') closers += ']';
    else if (c == '{') closers += '}';
    else if (c == '<' && angles) closers += '>';
    else if (c == ')' || c == ']' || c == '}' || (c == '>' && angles)) {
      if (closers.empty() || closers.back() != c) {
        if (c == '>') continue;  // `->` in an expression
        return std::string::npos;
      }
      closers.pop_back();
      if (closers.empty()) return i + 1;
    }
  }
  return std::string::npos;
}

// `{lambda(at::Tensor const&)#1}` -> `{lambda#1}`.
std::string without_parameter_lists(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '(' && i > 0) {
      size_t end = skip_group(text, i);
      if (end != std::string::npos) {
        i = end;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

// --- width -----------------------------------------------------------------------------------

size_t code_points(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string cut(const std::string& text, size_t width) {
  if (code_points(text) <= width) return text;
  if (width <= 3) return std::string("...").substr(0, width);
  return prefix_of(text, width - 3) + "...";
}

// --- the default view ------------------------------------------------------------------------

struct ViewLine {
  std::string name;
  std::string location;
  size_t frames = 1;  // frames this line stands for (a fold line stands for several)
  const LogicalFrame* frame = nullptr;  // the frame it shows; null for a fold line
};

ViewLine fold_line(const std::string& group, size_t frames) {
  return ViewLine{"[" + group + ": " + std::to_string(frames) + (frames == 1 ? " frame]" : " frames]"), "", frames};
}

ViewLine frame_line(const LogicalFrame& frame, const StackViewOptions& options) {
  return ViewLine{frame_name(frame, options.full_names), frame_location(frame), 1, &frame};
}

struct Judged {
  const LogicalFrame* frame;
  FrameClass what;
};

// User frames first (Python, then native, each innermost first), then one line per library group,
// in the order the groups first appear from the innermost frame.
void user_first(const std::vector<Judged>& frames, const StackViewOptions& options, std::vector<ViewLine>& lines) {
  for (bool python : {true, false}) {
    for (const Judged& j : frames) {
      if (j.what.role == FrameRole::User && j.frame->python == python) lines.push_back(frame_line(*j.frame, options));
    }
  }
  std::vector<std::pair<std::string, size_t>> groups;
  for (const Judged& j : frames) {
    if (j.what.role != FrameRole::Library) continue;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == j.what.group; });
    if (group == groups.end()) groups.emplace_back(j.what.group, 1);
    else ++group->second;
  }
  for (const auto& [group, count] : groups) lines.push_back(fold_line(group, count));
}

// No user frame to lead with: every frame in order, runs of frames of one library that have no
// symbol (which say no more than their count) folded.
void frame_by_frame(const std::vector<Judged>& frames, const StackViewOptions& options,
                    std::vector<ViewLine>& lines) {
  auto foldable = [](const Judged& j) { return j.what.role == FrameRole::Library && !has_symbol(*j.frame); };
  for (size_t i = 0; i < frames.size();) {
    size_t run = 1;
    while (foldable(frames[i]) && i + run < frames.size() && foldable(frames[i + run]) &&
           frames[i + run].what.group == frames[i].what.group) {
      ++run;
    }
    lines.push_back(run > 1 ? fold_line(frames[i].what.group, run) : frame_line(*frames[i].frame, options));
    i += run;
  }
}

std::vector<ViewLine> default_view(const Stack& stack, const StackViewOptions& options, const char** empty_reason) {
  size_t end = frames_above_entry(stack);
  bool has_python = std::any_of(stack.begin(), stack.end(), [](const LogicalFrame& f) { return f.python; });
  std::vector<Judged> shown;
  bool hidden = false;
  for (size_t i = 0; i < end; ++i) {
    FrameClass what = classify_frame(stack[i], options);
    if (what.role == FrameRole::Hidden) {
      hidden = true;
      continue;
    }
    if (has_python && what.role == FrameRole::Library && what.group == kInterpreterGroup) continue;
    shown.push_back(Judged{&stack[i], std::move(what)});
  }
  std::vector<ViewLine> lines;
  if (std::any_of(shown.begin(), shown.end(), [](const Judged& j) { return j.what.role == FrameRole::User; })) {
    user_first(shown, options, lines);
  } else {
    frame_by_frame(shown, options, lines);
  }
  *empty_reason = hidden ? "(only CUDA/profiler frames)" : "(only start-up frames)";
  return lines;
}

}  // namespace

// The first `n` code points of `text`.
std::string prefix_of(const std::string& text, size_t n) {
  size_t seen = 0, i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return text.substr(0, i);
}

bool is_internal_frame(const LogicalFrame& frame) {
  std::string module = basename_of(frame.module);
  if (starts_with_any(module, {"libgpumemtrace", "libcudart", "libcuda.", "libcupti"})) return true;
  // The profiler's own Python packages (tools/python: gpumemtrace.scope, the PyTorch hook, the pytest
  // plugin and its results module, which runs the tests under a session gate): they appear in the stacks
  // of scope events and of what they charge to them.
  if (frame.python) {
    for (const char* part : {"/gpumemtrace/__init__.py", "/gpumemtrace_torch/", "/gpumemtrace_pytest"}) {
      if (frame.file.find(part) != std::string::npos) return true;
    }
    return false;
  }
  // The profiler's namespace, and the C API of include/gpumemtrace.h (inline functions that end up
  // in the application: gpumemtrace_block_alloc, gpumemtrace_lookup_, ...).
  return starts_with_any(frame.function, {"gpumemtrace::", "gpumemtrace_"});
}

FrameClass classify_frame(const LogicalFrame& frame, const StackViewOptions& options) {
  const std::string* library_pattern = nullptr;
  size_t user = longest_match(options.user_code, frame, nullptr);
  size_t lib = longest_match(options.library, frame, &library_pattern);
  if (user == 0 && lib == 0) return builtin_class(frame);
  if (user >= lib) return FrameClass{};
  FrameClass builtin = builtin_class(frame);
  return library(builtin.role == FrameRole::Library ? builtin.group : *library_pattern);
}

size_t frames_above_entry(const Stack& stack) {
  for (size_t i = 0; i < stack.size(); ++i) {
    if (stack[i].python) continue;  // a Python function may well be called `main`
    std::string function = unversioned(stack[i].function);
    if (function == "main") return i + 1;
    if (function == "Py_RunMain" || function == "Py_BytesMain" || function == "Py_Main" || function == "_start" ||
        starts_with(function, "__libc_start_") || function == "start_thread" || function == "clone" ||
        function == "clone3" || function == "__clone" || function == "__clone3") {
      return i;
    }
  }
  return stack.size();
}

std::string short_function_name(const std::string& name) {
  static const std::string kAnonymous = "(anonymous namespace)";
  std::string out;
  bool in_conversion = false;  // after `operator ` (a conversion, new, delete): spaces belong to the name
  size_t i = 0;
  while (i < name.size()) {
    char c = name[i];
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      out += kAnonymous;
      i += kAnonymous.size();
    } else if (operator_keyword_at(name, i)) {
      out += "operator";
      i += std::strlen("operator");
      size_t symbol = operator_symbol_length(name, i);
      out.append(name, i, symbol);
      i += symbol;
      if (symbol == 0 && i < name.size() && name[i] == ' ') {
        in_conversion = true;
        out += name[i++];
      }
    } else if (c == '[' && name.compare(i, 2, "[]") == 0) {
      out += "[]";  // `operator new[]`
      i += 2;
    } else if (c == '<' || c == '(' || c == '[' || c == '{') {
      size_t end = skip_group(name, i);
      if (end == std::string::npos) break;  // unbalanced: keep what came before
      if (c == '<') out += "<...>";
      if (c == '{') out += without_parameter_lists(name.substr(i, end - i));
      // A parameter list ends the name unless a nested scope follows (`f()::{lambda()#1}::...`):
      // what comes after it is a qualifier (` const`, ` &&`) or a `[clone .cold]` suffix.
      if (c == '(' && name.compare(end, 2, "::") != 0) break;
      if (c == '(') in_conversion = false;
      i = end;  // '[': an ABI tag or a clone suffix, dropped
    } else if (c == ' ' && !in_conversion) {
      // The end of a return type (`at::Tensor at::empty(...)`), or of `virtual thunk to`; but not
      // the space before an operator's template arguments or a `[clone ...]` suffix.
      if (i + 1 < name.size() && name[i + 1] == '<') out += ' ';
      else if (i + 1 < name.size() && name[i + 1] != '[') out.clear();
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? name : out;
}

std::string frame_name(const LogicalFrame& frame, bool full_names) {
  if (has_symbol(frame)) {
    return frame.python || full_names ? frame.function : short_function_name(frame.function);
  }
  if (frame.python) return "(unknown function)";
  if (!frame.module.empty()) {
    std::string module = basename_of(frame.module);
    if (frame.offset) return module + "+" + hex(frame.offset);
    return frame.ip ? module + " at " + hex(frame.ip) : module;
  }
  return frame.ip ? hex(frame.ip) : std::string("(unknown frame)");
}

std::string frame_location(const LogicalFrame& frame) {
  if (!frame.file.empty()) return frame.line ? frame.file + ":" + std::to_string(frame.line) : frame.file;
  if (has_symbol(frame) && !frame.python && !frame.module.empty()) return basename_of(frame.module);
  return "";
}

std::string fit_line(const std::string& name, const std::string& location, size_t width) {
  std::string line = location.empty() ? name : name + " (" + location + ")";
  if (width == 0 || code_points(line) <= width) return line;
  size_t location_chars = location.empty() ? 0 : code_points(location) + 3;  // " (" ... ")"
  if (location_chars && width >= location_chars + kMinNameChars) {
    return cut(name, width - location_chars) + " (" + location + ")";
  }
  return cut(line, width);
}

namespace {

// The lines of the view, at most options.max_frames of them and then one "... N more frames" line.
std::vector<ViewLine> view_lines(const Stack& stack, const StackViewOptions& options) {
  if (stack.empty()) return {ViewLine{"(no stack recorded)", "", 0}};
  std::vector<ViewLine> lines;
  const char* empty_reason = "";
  if (options.native) {
    for (const LogicalFrame& frame : stack) lines.push_back(frame_line(frame, options));
  } else {
    lines = default_view(stack, options, &empty_reason);
  }
  if (lines.empty()) return {ViewLine{empty_reason, "", 0}};
  size_t more = 0;
  for (size_t i = options.max_frames; i < lines.size(); ++i) more += lines[i].frames;
  if (lines.size() > options.max_frames) {
    lines.resize(options.max_frames);
    lines.push_back(ViewLine{"... " + std::to_string(more) + (more == 1 ? " more frame" : " more frames"), "", more});
  }
  return lines;
}

}  // namespace

std::vector<std::string> stack_lines(const Stack& stack, const StackViewOptions& options, size_t indent) {
  size_t width = options.width == 0 ? 0 : options.width > indent ? options.width - indent : 1;
  std::vector<std::string> out;
  for (const ViewLine& line : view_lines(stack, options)) out.push_back(fit_line(line.name, line.location, width));
  return out;
}

std::vector<StackViewLine> stack_view(const Stack& stack, const StackViewOptions& options) {
  std::vector<StackViewLine> out;
  for (const ViewLine& line : view_lines(stack, options)) {
    if (line.frame) out.push_back(StackViewLine{static_cast<size_t>(line.frame - stack.data()), ""});
    else out.push_back(StackViewLine{StackViewLine::kText, line.name});
  }
  return out;
}

std::vector<StackViewLine> flame_view(const Stack& stack, const StackViewOptions& options) {
  const size_t end = frames_above_entry(stack);
  const bool has_python = std::any_of(stack.begin(), stack.end(), [](const LogicalFrame& f) { return f.python; });
  auto start_up = [](const FrameClass& what) {
    return what.role == FrameRole::Library && (what.group == kPytestGroup || what.group == kStdlibGroup);
  };
  std::vector<StackViewLine> out;
  std::string run;  // the start-up group of the last line, when it is a fold
  for (size_t i = 0; i < end; ++i) {
    const FrameClass what = classify_frame(stack[i], options);
    if (what.role == FrameRole::Hidden) continue;
    if (has_python && what.role == FrameRole::Library && what.group == kInterpreterGroup) continue;
    if (!start_up(what)) {
      out.push_back(StackViewLine{i, ""});
      run.clear();
    } else if (run != what.group) {
      out.push_back(StackViewLine{StackViewLine::kText, "[" + what.group + "]"});
      run = what.group;
    }
  }
  // The outermost runs of start-up folds: where a stack cut at the depth limit begins.
  size_t keep = out.size();
  while (keep > 1 && out[keep - 1].frame == StackViewLine::kText) --keep;
  out.resize(keep);
  return out;
}

}  // namespace gpumemtrace::report
