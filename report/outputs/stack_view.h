// report/outputs/stack_view.h — stacks as people read them in the text report: the code the user
// wrote first, library internals folded into one line per library, C++ names without template
// arguments and parameter lists, no line wider than the terminal.
//
// Pure functions over resolved stacks (report/reader/symbols.h): no I/O, no global state, safe to
// call from any thread. The JSON output does not use them; it keeps every frame as recorded.
// docs/report.md ("Stacks in the text report") says how a frame is judged user or library code.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

struct StackViewOptions {
  static constexpr size_t kNoLimit = static_cast<size_t>(-1);
  bool native = false;       // every recorded frame in recorded order: nothing hidden, folded or cut
  bool full_names = false;   // C++ names as recorded (template arguments, parameter lists)
  size_t max_frames = 12;    // lines per stack, then "... N more frames"
  size_t width = 160;        // characters per line, indent included; 0 = no limit
  // Overrides of the built-in judgement, in the syntax of --suppressions patterns (substring, `*`,
  // `^`/`$`), matched against a frame's function, file and module. When patterns of both lists
  // match a frame, the longer pattern wins (a tie goes to user code).
  std::vector<std::string> user_code;
  std::vector<std::string> library;
};

enum class FrameRole {
  User,     // code the user wrote: one line per frame, shown first
  Library,  // folded: one line per group
  Hidden,   // the profiler's frames and the CUDA runtime/driver call being recorded: never shown
};

struct FrameClass {
  FrameRole role = FrameRole::User;
  std::string group;  // Library only: the fold line's label ("torch internals", "libcublas.so.13")
};

// The label of the interpreter's own native frames (libpython, ctypes, libffi). In stacks that have
// Python frames these repeat what the Python frames say and are dropped, not folded.
extern const char* const kInterpreterGroup;

// User, library or hidden, by the options' patterns first, then the built-in rules.
FrameClass classify_frame(const LogicalFrame& frame, const StackViewOptions& options);

// True for frames of libgpumemtrace and of the CUDA runtime, driver and CUPTI (libcudart, libcuda,
// libcupti), and for the profiler's functions compiled into the program (gpumemtrace_*).
bool is_internal_frame(const LogicalFrame& frame);

// The number of frames shown above the program's or the interpreter's entry: the index of the
// innermost native `Py_RunMain`, `Py_BytesMain`, `_start`, `__libc_start_*`, `start_thread` or
// `clone` frame, or one past the innermost native `main` (main itself is shown). stack.size() when
// there is none (a stack cut short by the recorder's depth limit).
size_t frames_above_entry(const Stack& stack);

// A demangled C++ name without template arguments (`<...>`), parameter lists, return type and
// qualifiers: `at::Tensor c10::impl::wrap_<X<int>>::call(c10::OperatorKernel*) const` ->
// `c10::impl::wrap_<...>::call`. Keeps operator names (`operator<`, `operator()`, `operator new[]`),
// `(anonymous namespace)` and lambdas (`{lambda#1}`). C names come back unchanged; a name it cannot
// take apart comes back whole.
std::string short_function_name(const std::string& name);

// What a frame is: its function (shortened unless full_names; Python names as they are), or, when
// it has no symbol, `module+0xoffset`, else `0xip` (never a bare `??`).
std::string frame_name(const LogicalFrame& frame, bool full_names);
// Where it is: `file:line`, or the module's file name for a native frame with a symbol but no
// debug information; "" when neither is known or the name already says it.
std::string frame_location(const LogicalFrame& frame);

// `name (location)` in at most `width` characters (UTF-8 code points; 0 = no limit). What does not
// fit is cut from the name, which then ends in "...", so the location stays whole; when even the
// location does not leave room for a short name, the line is cut at the end.
std::string fit_line(const std::string& name, const std::string& location, size_t width);
// The first `n` code points of `text` (UTF-8; a cut never splits a character).
std::string prefix_of(const std::string& text, size_t n);

// The stack as the text report prints it, one string per line, without the indent; each at most
// options.width - indent characters. Never empty: a stack with nothing to show gives one line
// saying why.
std::vector<std::string> stack_lines(const Stack& stack, const StackViewOptions& options, size_t indent);

// The same lines before they are fitted to a width: each a frame of the stack (its index), or a
// text (a fold line, "... N more frames", or why nothing is shown). For outputs that draw frames
// themselves (the HTML report).
struct StackViewLine {
  static constexpr size_t kText = static_cast<size_t>(-1);
  size_t frame = kText;  // index into the stack, or kText
  std::string text;      // when frame is kText
};
std::vector<StackViewLine> stack_view(const Stack& stack, const StackViewOptions& options);

// The path a flame graph draws for the stack, innermost first: every frame the view would judge,
// each on its own (libraries are not folded: a flame graph parts where their calls part), without
// what says nothing about the program: the frames below the entry, the profiler's and CUDA's own
// frames, the interpreter's native frames where the stack has Python frames; each run of start-up
// frames (pytest and pluggy, the Python standard library) is one text line, `[pytest internals]`
// without a count so that paths through it merge, and the outermost such run is left out, so that
// a stack the recorder cut at its depth limit joins the tree of the whole ones (unless nothing
// else is left). Empty for an empty stack.
std::vector<StackViewLine> flame_view(const Stack& stack, const StackViewOptions& options);

}  // namespace gpumemtrace::report
