// tests/unit/report_stack_view_test.cpp — the text report's stack view (report/outputs/stack_view.h):
// C++ name shortening, user/library judgement and its overrides, folding, the cut below the entry,
// module+offset for frames without a symbol, and the line width.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/outputs/stack_view.h"

using namespace gpumemtrace::report;

namespace {

const char* kSitePackages = "/opt/conda/lib/python3.11/site-packages/";

LogicalFrame native(const std::string& function, const std::string& module, const std::string& file = "",
                    uint32_t line = 0, uint64_t offset = 0x1000) {
  LogicalFrame frame;
  frame.function = function;
  frame.module = module;
  frame.file = file;
  frame.line = line;
  frame.offset = offset;
  frame.ip = 0x7f0000000000 + offset;
  return frame;
}

LogicalFrame python(const std::string& function, const std::string& file, uint32_t line) {
  LogicalFrame frame;
  frame.function = function;
  frame.file = file;
  frame.line = line;
  frame.python = true;
  return frame;
}

size_t code_points(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// A PyTorch training step as the recorder merges it: cudaMalloc, the caching allocator, ATen's
// dispatch, cuBLAS (stripped), the interpreter, torch.nn's Python frames, the user's script, start-up.
Stack pytorch_stack() {
  const std::string torch_lib = std::string(kSitePackages) + "torch/lib/";
  const std::string cublas = std::string(kSitePackages) + "nvidia/cublas/lib/libcublas.so.13";
  Stack stack = {
      native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13"),
      native("", cublas, "", 0, 0x2a1b0), native("", cublas, "", 0, 0x2a3c4), native("", cublas, "", 0, 0x1f00),
      native("??", cublas, "", 0, 0x1e00),
      native("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, "
             "CUstream_st*)",
             torch_lib + "libc10_cuda.so", "c10/cuda/CUDACachingAllocator.cpp", 1234),
      native("at::Tensor at::native::addmm_out_cuda_impl<float>(at::Tensor&, at::Tensor const&)",
             torch_lib + "libtorch_cuda.so"),
      native("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
      python("Linear.forward", std::string(kSitePackages) + "torch/nn/modules/linear.py", 116),
      python("Module._call_impl", std::string(kSitePackages) + "torch/nn/modules/module.py", 1527),
      native("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
      python("train", "/home/me/proj/train.py", 23),
      python("<module>", "/home/me/proj/train.py", 40),
      native("PyEval_EvalCode", "/usr/bin/python3.11"),
      native("Py_RunMain", "/usr/bin/python3.11"),
      native("Py_BytesMain", "/usr/bin/python3.11"),
      native("main", "/usr/bin/python3.11"),
      native("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"),
      native("_start", "/usr/bin/python3.11"),
  };
  return stack;
}

}  // namespace

// --- names -----------------------------------------------------------------------------------

TEST(StackViewNames, TemplateArgumentsParameterListsAndReturnTypesGo) {
  EXPECT_EQ(short_function_name(
                "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
                "c10::CompileTimeFunctionPointer<at::Tensor (c10::ArrayRef<long>, std::optional<c10::ScalarType>), "
                "&at::(anonymous namespace)::empty>, at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<long> > >, "
                "at::Tensor (c10::ArrayRef<long>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<long>)"),
            "c10::impl::wrap_kernel_functor_unboxed_<...>::call");
  EXPECT_EQ(short_function_name("at::Tensor at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)"),
            "at::native::empty_cuda");
  EXPECT_EQ(short_function_name("void Pool<float, 3>::grow<std::allocator<float> >(unsigned long) const"),
            "Pool<...>::grow<...>");
  EXPECT_EQ(short_function_name("std::vector<int, std::allocator<int> > make(std::vector<std::vector<int> > const&)"),
            "make");
  EXPECT_EQ(short_function_name("plant_leak(int)"), "plant_leak");
  EXPECT_EQ(short_function_name("Model<float>::forward(at::Tensor const&) [clone .isra.0]"), "Model<...>::forward");
  EXPECT_EQ(short_function_name("helper [clone .cold]"), "helper");
  EXPECT_EQ(short_function_name("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::"
                                "_M_create[abi:cxx11](unsigned long&, unsigned long)"),
            "std::__cxx11::basic_string<...>::_M_create");
  EXPECT_EQ(short_function_name("non-virtual thunk to Foo::bar(int)"), "Foo::bar");
}

TEST(StackViewNames, OperatorsKeepTheirNames) {
  EXPECT_EQ(short_function_name("Foo::operator<(Foo const&) const"), "Foo::operator<");
  EXPECT_EQ(short_function_name("Foo::operator<<(int)"), "Foo::operator<<");
  EXPECT_EQ(short_function_name("Foo::operator<=>(Foo const&) const"), "Foo::operator<=>");
  EXPECT_EQ(short_function_name("Foo::operator->() const"), "Foo::operator->");
  EXPECT_EQ(short_function_name("Foo::operator>>=(int)"), "Foo::operator>>=");
  EXPECT_EQ(short_function_name("std::less<Key>::operator()(Key const&, Key const&) const"),
            "std::less<...>::operator()");
  EXPECT_EQ(short_function_name("bool operator< <Key>(Key const&, Key const&)"), "operator< <...>");
  EXPECT_EQ(short_function_name("Foo::operator unsigned long() const"), "Foo::operator unsigned long");
  EXPECT_EQ(short_function_name("operator new[](unsigned long)"), "operator new[]");
  EXPECT_EQ(short_function_name("Vec::operator[](unsigned long)"), "Vec::operator[]");
  // An operator name inside template arguments does not unbalance them.
  EXPECT_EQ(short_function_name("Bar<&Foo::operator<>::run()"), "Bar<...>::run");
  EXPECT_EQ(short_function_name("Bar<&Foo::operator>, 2>::run()"), "Bar<...>::run");
  EXPECT_EQ(short_function_name("operator_helper(int)"), "operator_helper");
}

TEST(StackViewNames, LambdasAndAnonymousNamespaces) {
  EXPECT_EQ(short_function_name("train()::{lambda(at::Tensor const&)#1}::operator()(at::Tensor const&) const"),
            "train::{lambda#1}::operator()");
  EXPECT_EQ(short_function_name("foo()::$_0::operator()() const"), "foo::$_0::operator()");
  EXPECT_EQ(short_function_name("(anonymous namespace)::make_buffer(int)"), "(anonymous namespace)::make_buffer");
  EXPECT_EQ(short_function_name("at::(anonymous namespace)::empty_impl<float>(long)"),
            "at::(anonymous namespace)::empty_impl<...>");
  EXPECT_EQ(short_function_name("std::_Function_handler<void (), run()::{lambda()#2}>::_M_invoke(std::_Any_data const&)"),
            "std::_Function_handler<...>::_M_invoke");
}

TEST(StackViewNames, CNamesAndUnbalancedNamesComeBackWhole) {
  EXPECT_EQ(short_function_name("cudaMalloc"), "cudaMalloc");
  EXPECT_EQ(short_function_name("__libc_start_main@@GLIBC_2.34"), "__libc_start_main@@GLIBC_2.34");
  EXPECT_EQ(short_function_name("broken<int(unsigned"), "broken");
  EXPECT_EQ(short_function_name("(x"), "(x");
  EXPECT_EQ(short_function_name(""), "");
}

TEST(StackViewNames, FramesWithoutASymbolShowModuleAndOffset) {
  EXPECT_EQ(frame_name(native("", "/usr/lib/libcublas.so.13", "", 0, 0x2a1b0), false), "libcublas.so.13+0x2a1b0");
  EXPECT_EQ(frame_name(native("??", "/usr/lib/libcublas.so.13", "", 0, 0x10), false), "libcublas.so.13+0x10");
  EXPECT_EQ(frame_location(native("??", "/usr/lib/libcublas.so.13")), "");
  LogicalFrame jit;
  jit.ip = 0x7f12345000;
  EXPECT_EQ(frame_name(jit, false), "0x7f12345000");
  EXPECT_EQ(frame_name(LogicalFrame{}, false), "(unknown frame)");
  // With a symbol: shortened unless full names; the module stands in for a missing file.
  LogicalFrame f = native("Pool<float>::grow(unsigned long)", "/home/me/proj/build/libpool.so");
  EXPECT_EQ(frame_name(f, false), "Pool<...>::grow");
  EXPECT_EQ(frame_name(f, true), "Pool<float>::grow(unsigned long)");
  EXPECT_EQ(frame_location(f), "libpool.so");
  // Python names are never taken apart.
  LogicalFrame py = python("<module>", "train.py", 3);
  EXPECT_EQ(frame_name(py, false), "<module>");
  EXPECT_EQ(frame_location(py), "train.py:3");
}

// --- user or library -------------------------------------------------------------------------

TEST(StackViewClassify, BuiltInRules) {
  StackViewOptions options;
  auto role = [&](const LogicalFrame& f) { return classify_frame(f, options).role; };
  auto group = [&](const LogicalFrame& f) { return classify_frame(f, options).group; };
  EXPECT_EQ(role(python("train", "/home/me/proj/train.py", 1)), FrameRole::User);
  EXPECT_EQ(role(python("<module>", "train.py", 1)), FrameRole::User);
  EXPECT_EQ(group(python("forward", std::string(kSitePackages) + "torch/nn/modules/linear.py", 1)), "torch internals");
  EXPECT_EQ(group(python("forward", "/usr/lib/python3/dist-packages/transformers/modeling.py", 1)),
            "transformers internals");
  EXPECT_EQ(group(python("ensure", std::string(kSitePackages) + "six.py", 1)), "six internals");
  // pytest's packages and its plugin manager: one group.
  for (const char* file : {"_pytest/python.py", "pluggy/_callers.py", "pytest/__main__.py"})
    EXPECT_EQ(group(python("f", std::string(kSitePackages) + file, 1)), "pytest internals") << file;
  EXPECT_EQ(group(python("f", "/usr/lib/python3/dist-packages/_pytest/runner.py", 1)), "pytest internals");
  EXPECT_EQ(group(python("run", "/usr/lib/python3.11/threading.py", 1)), "python stdlib");
  EXPECT_EQ(group(python("_load", "<frozen importlib._bootstrap>", 1)), "python stdlib");

  EXPECT_EQ(role(native("main", "/usr/bin/app")), FrameRole::User);
  EXPECT_EQ(role(native("run", "/home/me/proj/build/libmodel.so")), FrameRole::User);
  EXPECT_EQ(group(native("x", std::string(kSitePackages) + "torch/lib/libtorch_cuda.so")), "torch internals");
  EXPECT_EQ(group(native("x", "/opt/libtorch/lib/libc10.so")), "torch internals");
  EXPECT_EQ(group(native("", std::string(kSitePackages) + "nvidia/cublas/lib/libcublas.so.13")), "libcublas.so.13");
  EXPECT_EQ(group(native("x", "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9")), "libcudnn_ops.so.9");
  EXPECT_EQ(group(native("memcpy", "/lib/x86_64-linux-gnu/libc.so.6")), "libc.so.6");
  EXPECT_EQ(group(native("x", "/home/me/miniconda3/envs/t/lib/libstdc++.so.6")), "libstdc++.so.6");
  EXPECT_EQ(group(native("_PyEval_EvalFrameDefault", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")),
            kInterpreterGroup);
  EXPECT_EQ(group(native("ffi_call", "/usr/lib/x86_64-linux-gnu/libffi.so.8")), kInterpreterGroup);
  EXPECT_EQ(group(native("x", std::string(kSitePackages) + "numpy/core/_multiarray_umath.cpython-311.so")),
            "numpy internals");

  EXPECT_EQ(role(native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13")), FrameRole::Hidden);
  EXPECT_EQ(role(native("cuMemAlloc_v2", "/usr/lib/libcuda.so.1")), FrameRole::Hidden);
  EXPECT_EQ(role(native("gpumemtrace_block_alloc", "/usr/bin/app")), FrameRole::Hidden);

  // No module (a PyTorch snapshot's C++ frames): by the name.
  EXPECT_EQ(group(native("at::native::empty_cuda(long)", "")), "torch internals");
  EXPECT_EQ(group(native("PyObject_Call", "")), kInterpreterGroup);
  EXPECT_EQ(role(native("my_kernel_launch", "")), FrameRole::User);
  EXPECT_EQ(role(native("", "")), FrameRole::Library);
}

// PyTorch snapshots recorded on Windows, and CPython's own C frames as snapshots name them (no
// module; a file of CPython's source tree, or a static function of it; compiler clone suffixes).
TEST(StackViewClassify, WindowsPathsAndCPythonsOwnFramesAreLibraries) {
  StackViewOptions options;
  auto group = [&](const LogicalFrame& f) { return classify_frame(f, options).group; };
  EXPECT_EQ(group(python("einsum", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\torch\\functional.py", 373)),
            "torch internals");
  EXPECT_EQ(group(python("einsum", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\einops\\einops.py", 939)),
            "einops internals");
  EXPECT_EQ(group(python("_run_code", "C:\\Program Files\\Python311\\Lib\\runpy.py", 88)), "python stdlib");
  EXPECT_EQ(classify_frame(python("forward", "D:\\Dev\\a2\\cs336_basics\\model.py", 39), options).role,
            FrameRole::User);
  EXPECT_EQ(group(native("x", "C:\\env\\Lib\\site-packages\\torch\\lib\\c10_cuda.dll")), "torch internals");

  for (const char* name : {"do_call_core", "builtin_exec", "pythread_wrapper", "thread_run", "slot_tp_call",
                           "slot_nb_multiply", "_PyEval_EvalFrameDefault", "_PyObject_MakeTpCall.localalias",
                           "method_vectorcall.llvm.12275804309777372242", "pyrun_file.cold",
                           "_PyObject_VectorcallTstate.lto_priv.2", "vectorcall_maybe.constprop.0", "Py_RunMain.localalias"}) {
    EXPECT_EQ(group(native(name, "")), kInterpreterGroup) << name;
  }
  // By its file when the name says nothing: any function of CPython's source tree.
  EXPECT_EQ(group(native("anything", "", "/usr/local/src/conda/python-3.10.16/Python/ceval.c", 5)), kInterpreterGroup);
  EXPECT_EQ(group(native("anything", "", "/usr/local/src/conda/python-3.10.16/Include/internal/pycore_ceval.h", 5)),
            kInterpreterGroup);
  EXPECT_EQ(group(native("anything", "", "/croot/python-split_1715/work/build-static/Python/bytecodes.c", 5)),
            kInterpreterGroup);
  // A project's own Modules/ folder is not CPython's; a user function is not one by a near name.
  EXPECT_EQ(classify_frame(native("anything", "", "/home/me/proj/Modules/loader.c", 5), options).role, FrameRole::User);
  EXPECT_EQ(classify_frame(native("call_function_pointer_table", ""), options).role, FrameRole::User);
  // The entry of a snapshot's stack carries a clone suffix too.
  Stack snapshot = {native("at::native::empty_cuda(long)", ""), python("<module>", "train.py", 3),
                    native("Py_RunMain.localalias", ""), native("Py_BytesMain", ""), native("_start", "")};
  EXPECT_EQ(frames_above_entry(snapshot), 2u);
}

TEST(StackViewClassify, PatternsOverrideAndTheLongerPatternWins) {
  StackViewOptions options;
  LogicalFrame linear = python("Linear.forward", std::string(kSitePackages) + "torch/nn/modules/linear.py", 116);
  LogicalFrame vendored = native("Eigen::run(int)", "/home/me/proj/build/app", "/home/me/proj/third_party/eigen.h", 9);
  LogicalFrame mine = native("train_step(int)", "/home/me/proj/build/app", "/home/me/proj/src/train.cpp", 9);
  options.user_code = {"torch/nn/modules/"};
  EXPECT_EQ(classify_frame(linear, options).role, FrameRole::User);
  options.library = {"*/third_party/*"};
  EXPECT_EQ(classify_frame(vendored, options).role, FrameRole::Library);
  EXPECT_EQ(classify_frame(vendored, options).group, "*/third_party/*");  // the pattern names the fold
  EXPECT_EQ(classify_frame(mine, options).role, FrameRole::User);
  // Both match: the longer (more specific) pattern decides.
  options.user_code = {"/home/me/proj/"};
  EXPECT_EQ(classify_frame(vendored, options).role, FrameRole::Library);
  options.user_code = {"/home/me/proj/third_party/"};
  EXPECT_EQ(classify_frame(vendored, options).role, FrameRole::User);
  // Matched against the function and the module too; a library pattern on a built-in library frame
  // keeps the built-in group.
  options = StackViewOptions{};
  options.library = {"^train_step"};
  EXPECT_EQ(classify_frame(mine, options).role, FrameRole::Library);
  options.library = {"torch"};
  EXPECT_EQ(classify_frame(linear, options).group, "torch internals");
}

// --- the cut below the entry -----------------------------------------------------------------

TEST(StackViewEntry, FramesBelowMainOrTheInterpreterEntryAreCut) {
  Stack cxx = {native("alloc", "/usr/bin/app"), native("main", "/usr/bin/app"),
               native("__libc_start_call_main", "/lib/libc.so.6"), native("__libc_start_main@@GLIBC_2.34", "/lib/libc.so.6"),
               native("_start", "/usr/bin/app")};
  EXPECT_EQ(frames_above_entry(cxx), 2u);  // main itself stays
  EXPECT_EQ(frames_above_entry(pytorch_stack()), 14u);  // Py_RunMain and below go
  Stack thread = {native("work", "/usr/bin/app"), native("start_thread", "/lib/libc.so.6"), native("clone3", "/lib/libc.so.6")};
  EXPECT_EQ(frames_above_entry(thread), 1u);
  Stack stripped = {native("", "/usr/bin/app"), native("__libc_start_call_main", "/lib/libc.so.6")};
  EXPECT_EQ(frames_above_entry(stripped), 1u);
  // A Python function called main is the user's, not an entry; a stack cut short has no entry.
  Stack py_main = {python("main", "train.py", 3), python("<module>", "train.py", 9)};
  EXPECT_EQ(frames_above_entry(py_main), 2u);
}

// --- the whole view --------------------------------------------------------------------------

TEST(StackViewLines, PyTorchStackLeadsWithTheUsersLinesAndFoldsTheRest) {
  StackViewOptions options;
  std::vector<std::string> lines = stack_lines(pytorch_stack(), options, 6);
  EXPECT_EQ(lines, (std::vector<std::string>{"train (/home/me/proj/train.py:23)", "<module> (/home/me/proj/train.py:40)",
                                              "[libcublas.so.13: 4 frames]", "[torch internals: 4 frames]"}));
}

// A test's stack as pytest runs it: the test, then pytest's, pluggy's and pytest's frames again,
// interleaved (pytest_pyfunc_call, _multicall, _hookexec, runtestprotocol, ...): one fold line.
TEST(StackViewLines, PytestAndPluggyFramesFoldIntoOneLine) {
  StackViewOptions options;
  const std::string sp = "/usr/lib/python3/dist-packages/";
  Stack stack = {python("test_keeps_tensor", "/home/me/proj/tests/test_m.py", 14),
                 python("pytest_pyfunc_call", sp + "_pytest/python.py", 194),
                 python("_multicall", sp + "pluggy/_callers.py", 103),
                 python("_hookexec", sp + "pluggy/_manager.py", 120),
                 python("runtest", sp + "_pytest/python.py", 1792),
                 python("pytest_runtest_call", sp + "_pytest/runner.py", 169),
                 python("_multicall", sp + "pluggy/_callers.py", 103),
                 python("main", sp + "_pytest/config/__init__.py", 166),
                 python("<module>", sp + "pytest/__main__.py", 5),
                 python("_run_code", "/usr/lib/python3.11/runpy.py", 88)};
  EXPECT_EQ(stack_lines(stack, options, 6),
            (std::vector<std::string>{"test_keeps_tensor (/home/me/proj/tests/test_m.py:14)",
                                      "[pytest internals: 8 frames]", "[python stdlib: 1 frame]"}));
}

// --- the flame graph's path ---------------------------------------------------------------------

std::vector<std::string> flame_lines(const Stack& stack) {
  std::vector<std::string> out;
  for (const StackViewLine& line : flame_view(stack, StackViewOptions{})) {
    out.push_back(line.frame == StackViewLine::kText ? line.text : stack[line.frame].function);
  }
  return out;
}

TEST(StackViewFlame, LibrariesStayFrameByFrameWithoutInterpreterProfilerAndStartUp) {
  EXPECT_EQ(flame_lines(pytorch_stack()),
            (std::vector<std::string>{"", "", "", "??",
                                      "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed "
                                      "char, unsigned long, CUstream_st*)",
                                      "at::Tensor at::native::addmm_out_cuda_impl<float>(at::Tensor&, at::Tensor const&)",
                                      "Linear.forward", "Module._call_impl", "train", "<module>"}));
  // The PyTorch hook's and the scope API's Python frames are the profiler's.
  Stack hooked = {native("[autograd engine thread, under backward()]", ""), native("ffi_call", "/lib/libffi.so.8"),
                  python("scope_begin", "/opt/x/gpumemtrace/__init__.py", 65),
                  python("install.<locals>.backward", "/opt/x/gpumemtrace_torch/backward_scope.py", 30),
                  python("Tensor.backward", "/opt/venv/lib/python3.12/site-packages/torch/_tensor.py", 631),
                  python("<module>", "step.py", 15), native("PyEval_EvalCode", "/usr/bin/python3.12"),
                  native("Py_BytesMain", "/usr/bin/python3.12"), native("_start", "/usr/bin/python3.12")};
  EXPECT_EQ(flame_lines(hooked),
            (std::vector<std::string>{"[autograd engine thread, under backward()]", "Tensor.backward", "<module>"}));
  EXPECT_TRUE(flame_view(Stack{}, StackViewOptions{}).empty());
}

// A test's stack whole (down to _start) and the same stack cut at the recorder's depth limit in the
// middle of pytest's frames: one path, so the flame graph does not split into `_start` and `_main`.
TEST(StackViewFlame, PytestFramesFoldAndACutStackJoinsTheWholeOnes) {
  const std::string sp = "/usr/lib/python3/dist-packages/";
  Stack whole = {python("helper", "/home/me/proj/tests/util.py", 3),
                 python("_inner", sp + "_pytest/fixtures.py", 9),  // pytest between two user frames
                 python("test_keeps_tensor", "/home/me/proj/tests/test_m.py", 14),
                 python("pytest_pyfunc_call", sp + "_pytest/python.py", 194),
                 python("_multicall", sp + "pluggy/_callers.py", 103),
                 python("_main", sp + "_pytest/main.py", 384),
                 python("<module>", sp + "pytest/__main__.py", 5),
                 python("_run_code", "/usr/lib/python3.11/runpy.py", 88),
                 native("Py_RunMain", "/usr/bin/python3.11"), native("_start", "/usr/bin/python3.11")};
  Stack cut(whole.begin(), whole.begin() + 6);  // ends in pytest's _main
  const std::vector<std::string> expected = {"helper", "[pytest internals]", "test_keeps_tensor"};
  EXPECT_EQ(flame_lines(whole), expected);
  EXPECT_EQ(flame_lines(cut), expected);
  // Only start-up frames: one fold line stays.
  Stack plugin_only(whole.begin() + 3, whole.end());
  EXPECT_EQ(flame_lines(plugin_only), (std::vector<std::string>{"[pytest internals]"}));
}

TEST(StackViewLines, NativeShowsEveryFrameInRecordedOrder) {
  StackViewOptions options;
  options.native = true;
  options.max_frames = StackViewOptions::kNoLimit;
  Stack stack = pytorch_stack();
  std::vector<std::string> lines = stack_lines(stack, options, 6);
  ASSERT_EQ(lines.size(), stack.size());
  EXPECT_EQ(lines[0], "cudaMalloc (libcudart.so.13)");
  EXPECT_EQ(lines[1], "libcublas.so.13+0x2a1b0");
  EXPECT_EQ(lines[4], "libcublas.so.13+0x1e00");  // "??" from the symbolizer: never shown bare
  EXPECT_EQ(lines[5], "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc "
                      "(c10/cuda/CUDACachingAllocator.cpp:1234)");
  EXPECT_EQ(lines.back(), "_start (python3.11)");
  options.full_names = true;
  EXPECT_EQ(stack_lines(stack, options, 6)[6],
            "at::Tensor at::native::addmm_out_cuda_impl<float>(at::Tensor&, at::Tensor const&) (libtorch_cuda.so)");
}

TEST(StackViewLines, UserPythonFramesComeBeforeUserNativeFrames) {
  // Python calls the user's own extension (ctypes), which allocates.
  Stack stack = {native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13"),
                 native("native_alloc(int)", "/home/me/proj/build/libext.so", "/home/me/proj/ext.c", 7),
                 native("ffi_call_unix64", "/usr/lib/x86_64-linux-gnu/libffi.so.8"),
                 native("_PyEval_EvalFrameDefault", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"),
                 python("allocate_buffer", "train.py", 12),
                 native("Py_RunMain", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0")};
  EXPECT_EQ(stack_lines(stack, StackViewOptions{}, 0),
            (std::vector<std::string>{"allocate_buffer (train.py:12)", "native_alloc (/home/me/proj/ext.c:7)"}));
}

TEST(StackViewLines, WithoutUserFramesEachFrameIsShownAndUnnamedRunsFolded) {
  // An autograd worker thread: nothing of the user's on it.
  Stack stack = {native("", "/usr/lib/libcublas.so.13", "", 0, 0x10), native("", "/usr/lib/libcublas.so.13", "", 0, 0x20),
                 native("", "/usr/lib/libcublas.so.13", "", 0, 0x30),
                 native("at::native::addmm(at::Tensor const&)", "/opt/libtorch/lib/libtorch_cuda.so"),
                 native("torch::autograd::Engine::thread_main(std::shared_ptr<GraphTask> const&)",
                        "/opt/libtorch/lib/libtorch_cpu.so"),
                 native("start_thread", "/lib/x86_64-linux-gnu/libc.so.6")};
  EXPECT_EQ(stack_lines(stack, StackViewOptions{}, 0),
            (std::vector<std::string>{"[libcublas.so.13: 3 frames]", "at::native::addmm (libtorch_cuda.so)",
                                      "torch::autograd::Engine::thread_main (libtorch_cpu.so)"}));
}

TEST(StackViewLines, AtMostMaxFramesLinesThenTheCountOfTheRest) {
  Stack stack;
  for (int i = 0; i < 20; ++i) stack.push_back(python("level" + std::to_string(i), "train.py", 100 + i));
  stack.insert(stack.begin(), native("at::empty(long)", "/opt/libtorch/lib/libtorch_cpu.so"));
  StackViewOptions options;
  options.max_frames = 5;
  std::vector<std::string> lines = stack_lines(stack, options, 0);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "level0 (train.py:100)");
  EXPECT_EQ(lines[5], "... 16 more frames");  // 15 user frames and the folded torch frame
}

TEST(StackViewLines, NoLineIsWiderThanTheWidth) {
  std::string long_name = "ns::Kernel<" + std::string(300, 'T') + ">::launch_with_a_very_long_member_function_name_" +
                          std::string(200, 'x') + "(int)";
  std::string accented = "caf";
  for (int i = 0; i < 150; ++i) accented += "\xc3\xa9";  // "é": two bytes, one character
  Stack stack = {native(long_name, "/usr/bin/app", "/home/me/proj/src/kernels/launch.cpp", 77),
                 native(accented, "/usr/bin/app"),
                 native("main", "/usr/bin/app", std::string(300, 'd') + "/main.cpp", 3)};
  for (bool full : {false, true}) {
    StackViewOptions options;
    options.full_names = full;
    options.width = 100;
    std::vector<std::string> lines = stack_lines(stack, options, 8);
    ASSERT_EQ(lines.size(), 3u);
    for (const std::string& line : lines) {
      EXPECT_LE(code_points(line), 92u) << line;
      for (size_t i = 0; i < line.size(); ++i) {  // never a character cut in half
        if (line[i] == '\xc3') {
          EXPECT_EQ(line.substr(i, 2), "\xc3\xa9");
        }
      }
    }
    // The location survives a cut of the name.
    const std::string tail = "(/home/me/proj/src/kernels/launch.cpp:77)";
    EXPECT_EQ(lines[0].substr(lines[0].size() - tail.size()), tail);
    EXPECT_NE(lines[0].find("... ("), std::string::npos);
  }
  StackViewOptions unlimited;
  unlimited.full_names = true;
  unlimited.width = 0;
  EXPECT_EQ(stack_lines(stack, unlimited, 8)[0], long_name + " (/home/me/proj/src/kernels/launch.cpp:77)");
}

TEST(StackViewLines, FitLineCutsTheNameAndKeepsTheLocation) {
  EXPECT_EQ(fit_line("short", "a.py:1", 40), "short (a.py:1)");
  EXPECT_EQ(fit_line("abcdefghijklmnopqrstuvwxyz", "a.py:1", 30), "abcdefghijklmnopqr... (a.py:1)");
  EXPECT_EQ(fit_line("abcdefghijklmnopqrstuvwxyz", "", 10), "abcdefg...");
  EXPECT_EQ(fit_line("abcdefghij", "/a/very/long/path/to/a/file.py:1", 20), "abcdefghij (/a/ve...");
  // Code points, not bytes: "é" is two bytes and one character, and is never split.
  EXPECT_EQ(fit_line("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "", 4), "\xc3\xa9...");
  EXPECT_EQ(fit_line("anything", "x", 0), "anything (x)");
}

TEST(StackViewLines, EmptyAndHiddenOnlyStacksSaySo) {
  EXPECT_EQ(stack_lines(Stack{}, StackViewOptions{}, 4), (std::vector<std::string>{"(no stack recorded)"}));
  Stack cuda_only = {native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13")};
  EXPECT_EQ(stack_lines(cuda_only, StackViewOptions{}, 4), (std::vector<std::string>{"(only CUDA/profiler frames)"}));
  Stack startup_only = {native("_start", "/usr/bin/app")};
  EXPECT_EQ(stack_lines(startup_only, StackViewOptions{}, 4), (std::vector<std::string>{"(only start-up frames)"}));
}

TEST(StackViewNames, ArbitraryNamesNeitherCrashNorOverflowTheWidth) {
  // Names come from the trace: any bytes. A fixed pseudo-random sequence over the characters the
  // name parser cares about.
  const std::string alphabet = "<>()[]{}:, &*#$_=-operatornewabc\xc3\xa9";
  uint32_t state = 12345;
  auto next = [&state] { return state = state * 1103515245u + 12345u; };
  for (int round = 0; round < 20000; ++round) {
    std::string name;
    size_t length = next() % 48;
    for (size_t i = 0; i < length; ++i) name += alphabet[(next() >> 8) % alphabet.size()];
    std::string shortened = short_function_name(name);
    EXPECT_EQ(shortened.empty(), name.empty()) << name;
    EXPECT_LE(code_points(fit_line(shortened, name, 30)), 30u) << name;
  }
}
