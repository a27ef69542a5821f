#!/usr/bin/env python3
# tests/report/make_golden.py — writes the golden traces and, with --update, their expected reports.
"""Writes the golden traces in tests/report/golden/ (traces shaped like the recorder's) and, with
--update, their expected JSON reports (NAME.expected.json) and, for the stack-view traces, their
expected text reports (NAME.expected.txt) from the current build/gpumem-report.
Review the diff of the expected files before committing them: they are the contract."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tracegen import KiB, MiB, Trace  # noqa: E402

GOLDEN = os.path.join(HERE, "golden")


def mixed(path):
    """Leak, peak, capacity OOM, growth, marks, inlined and Python frames, two devices."""
    t = Trace(path, devices=((0, "Sim A", 1 << 30), (1, "Sim B", 1 << 30)), compact=False)
    w = t.stack("load_weights", 30, inlined="read_tensor")
    a = t.stack("forward", 40, python="model_forward")
    k = t.stack("accumulate_loss", 50)
    t.mark("init")
    t.alloc(0x10000000, 100 * MiB, w)
    t.alloc(0x80000000, 10 * MiB, w, device=1)
    for i in range(20):
        t.mark("step")
        t.alloc(0x20000000, 50 * MiB, a)
        t.alloc(0x40000000 + i * MiB, 256 * KiB, k)
        t.free(0x20000000)
    t.failed_alloc(2 << 30, a)
    t.meminfo(300 * MiB, 1 << 30)
    t.free(0x80000000, device=1)
    t.close()


def blocks(path):
    """A caching allocator: segments, blocks, a fragmentation OOM, cached memory at exit."""
    t = Trace(path, devices=((0, "Sim", 200 * MiB),))
    seg = t.stack("CachingAllocator::malloc", 3)
    u = t.stack("user_tensor", 4)
    t.alloc(0x100000000, 64 * MiB, seg)
    t.alloc(0x200000000, 32 * MiB, seg)
    for i in range(8):
        t.block_alloc(0x100000000 + i * 8 * MiB, 4 * MiB, u)
    t.block_alloc(0x200000000, 8 * MiB, u, segment=0x200000000)
    for i in range(0, 8, 2):
        t.block_free(0x100000000 + i * 8 * MiB)
    t.block_oom(40 * MiB, u)
    t.meminfo(2 * MiB, 200 * MiB)
    t.close()


def killed_truncated(path):
    t = Trace(path)
    s = t.stack("work", 1)
    t.alloc(0x1000, 3 * MiB, s)
    t.dropped(7)
    t.close(footer=False)
    with open(path, "a") as f:
        f.write('{"type":"event","seq":2,"t":5,"op":"fr')


SITE = "/opt/conda/lib/python3.11/site-packages/"
# The long template names PyTorch's dispatcher puts on every op (600+ characters demangled).
WRAP_KERNEL = ("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
               "c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, at::Tensor const&, "
               "at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&), "
               "&at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_addmm>, at::Tensor, "
               "c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, "
               "at::Tensor const&, c10::Scalar const&, c10::Scalar const&> >, at::Tensor (c10::DispatchKeySet, "
               "at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)>"
               "::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, "
               "at::Tensor const&, c10::Scalar const&, c10::Scalar const&)")


def pytorch_stacks(path):
    """A PyTorch training loop as the recorder sees it: Python frames of the user's train.py and
    model.py and of torch/nn (site-packages), the dispatcher and caching allocator in libtorch_cuda /
    libc10_cuda, stripped cuBLAS frames, the interpreter, start-up; and an autograd worker thread
    with no user frame. A cuBLAS workspace leaks, the loss history grows."""
    t = Trace(path, exe="/usr/bin/python3.11", cmdline=("python3", "train.py"))
    py, libc, c10, cuda, cpu, tpy, cublas, cxx = (
        t.module(3, "/usr/bin/python3.11"), t.module(4, "/lib/x86_64-linux-gnu/libc.so.6"),
        t.module(5, SITE + "torch/lib/libc10_cuda.so"), t.module(6, SITE + "torch/lib/libtorch_cuda.so"),
        t.module(7, SITE + "torch/lib/libtorch_cpu.so"), t.module(8, SITE + "torch/lib/libtorch_python.so"),
        t.module(9, SITE + "nvidia/cublas/lib/libcublas.so.13"),
        t.module(10, "/lib/x86_64-linux-gnu/libstdc++.so.6"))
    train, model = "/home/me/proj/train.py", "/home/me/proj/model.py"
    eval_frame = t.native(py, "_PyEval_EvalFrameDefault")
    module_call = [t.python("Module._call_impl", SITE + "torch/nn/modules/module.py", 1527),
                   t.python("Module._wrapped_call_impl", SITE + "torch/nn/modules/module.py", 1518)]
    entry = [t.native(py, "PyEval_EvalCode"), t.native(py, "run_mod"), t.native(py, "Py_RunMain"),
             t.native(py, "Py_BytesMain"), t.native(py, "main"), t.native(libc, "__libc_start_call_main"),
             t.native(libc, "__libc_start_main@@GLIBC_2.34"), t.native(py, "_start")]
    step = t.python("train_step", train, 23)
    script = [t.python("<module>", train, 40)]
    caching = [t.native(c10, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
                             "signed char, unsigned long, CUstream_st*)",
                        "c10/cuda/CUDACachingAllocator.cpp", 1187),
               t.native(c10, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc("
                             "void**, signed char, unsigned long, CUstream_st*)",
                        "c10/cuda/CUDACachingAllocator.cpp", 3069),
               t.native(c10, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate("
                             "unsigned long)", "c10/cuda/CUDACachingAllocator.cpp", 3201)]
    # model(x) -> Linear.forward -> F.linear -> addmm -> cuBLAS, which allocates its workspace.
    workspace = t.raw_stack(
        [t.cudart] + [t.native(cublas) for _ in range(4)] +
        [t.native(cuda, "void at::cuda::blas::gemm<float>(char, char, long, long, long, "
                        "at::OpMathType<float>::type, float const*, long, float const*, long, "
                        "at::OpMathType<float>::type, float*, long)", "aten/src/ATen/cuda/CUDABlas.cpp", 1024),
         t.native(cuda, "at::native::(anonymous namespace)::addmm_out_cuda_impl(at::Tensor&, at::Tensor const&, "
                        "at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&, "
                        "at::native::(anonymous namespace)::Activation)", "aten/src/ATen/native/cuda/Blas.cpp", 402),
         t.native(cuda, WRAP_KERNEL),
         t.native(cpu, "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, "
                       "c10::Scalar const&, c10::Scalar const&)"),
         t.native(cpu, "at::native::linear(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&)"),
         t.native(tpy, "torch::autograd::THPVariable_linear(_object*, _object*, _object*)"),
         t.native(py, "cfunction_call"), eval_frame,
         t.python("Linear.forward", SITE + "torch/nn/modules/linear.py", 116)] + module_call +
        [t.python("Net.forward", model, 31)] + module_call + [step] + script + entry)
    # loss_history.append(loss.detach()) kept every step: the growth.
    history = t.raw_stack(
        [t.cudart] + caching +
        [t.native(cuda, "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, "
                        "c10::ScalarType, std::optional<c10::MemoryFormat>)"),
         t.native(cuda, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, "
                        "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, "
                        "std::optional<c10::MemoryFormat>)"),
         t.native(cpu, "at::_ops::clone::call(at::Tensor const&, std::optional<c10::MemoryFormat>)"),
         t.native(tpy, "torch::autograd::THPVariable_clone(_object*, _object*, _object*)"),
         t.native(py, "method_vectorcall_VARARGS_KEYWORDS"), eval_frame,
         t.python("train_step", train, 27)] + script + entry)
    # The backward pass runs on an autograd worker thread: nothing of the user's on its stack.
    grad = t.raw_stack(
        [t.cudart] + caching +
        [t.native(cuda, "at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, "
                        "at::Tensor const&)"),
         t.native(cpu, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
                       "torch::autograd::Node*, torch::autograd::InputBuffer&, "
                       "std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
         t.native(cpu, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
         t.native(cpu, "torch::autograd::Engine::thread_init(int, "
                       "std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
         t.native(cxx), t.native(libc, "start_thread"), t.native(libc, "clone3")])
    t.alloc(0x700000000, 32 * MiB, workspace)
    for i in range(20):
        t.alloc(0x800000000, 64 * MiB, grad)
        t.alloc(0x900000000 + i * MiB, MiB, history)
        t.free(0x800000000)
    t.close()


def stripped_library(path):
    """A C++ program calling a vendor library without symbols (a system path: library code), its
    own plugin without symbols (user code), and code outside any module (JIT)."""
    t = Trace(path, exe="/usr/bin/infer", cmdline=("infer", "model.plan"), app_file="/src/main.cpp")
    vendor, plugin, libc = (t.module(3, "/opt/vendor/lib/libinfer.so.8"),
                            t.module(4, "/home/me/proj/build/libplugin.so"),
                            t.module(5, "/lib/x86_64-linux-gnu/libc.so.6"))
    entry = [t.main, t.native(libc, "__libc_start_call_main"), t.native(libc, "__libc_start_main@@GLIBC_2.34"),
             t.native(1, "_start")]
    engine = t.raw_stack([t.cudart] + [t.native(vendor) for _ in range(3)] +
                         [t.native(1, "Engine::load_model(std::__cxx11::basic_string<char, std::char_traits<char>, "
                                      "std::allocator<char> > const&)", "/src/engine.cpp", 88)] + entry)
    own = t.raw_stack([t.cudart, t.native(plugin), t.native(plugin)] + entry)
    jit = t.raw_stack([t.cudart, t._frame({"ip": "0x7fffe0001000", "function": ""})] + entry)
    t.alloc(0x10000000, 48 * MiB, engine)
    t.alloc(0x20000000, 2 * MiB, own)
    t.alloc(0x30000000, MiB, jit)
    t.close()


def cpp_templates(path):
    """A C++ program with long template names, a lambda through std::function, operator(), an
    anonymous namespace, and a worker thread started by libstdc++."""
    t = Trace(path, exe="/usr/bin/trainer", cmdline=("trainer",), app_file="/src/main.cpp")
    cxx, libc = t.module(3, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"), t.module(4, "/lib/x86_64-linux-gnu/libc.so.6")
    pool = t._frame({"ip": "0x555500002000", "module": 1, "offset": "0x2000",
                     "function": "Pool<Tensor<float, 3ul>, std::allocator<Tensor<float, 3ul> > >::grow(unsigned long)",
                     "file": "/src/pool.h", "line": 40,
                     "inlined": [{"function": "Pool<Tensor<float, 3ul>, std::allocator<Tensor<float, 3ul> > >::"
                                              "reserve_block<Tensor<float, 3ul> >(unsigned long, bool)",
                                  "file": "/src/pool.h", "line": 61}]})
    lam = t.native(1, "(anonymous namespace)::Trainer<Model<float, 3ul>, Adam<float> >::step(Batch const&)::"
                      "{lambda(Tensor<float, 3ul>&)#1}::operator()(Tensor<float, 3ul>&) const", "/src/trainer.cpp", 77)
    invoke = t.native(1, "std::_Function_handler<void (Tensor<float, 3ul>&), (anonymous namespace)::Trainer<"
                         "Model<float, 3ul>, Adam<float> >::step(Batch const&)::{lambda(Tensor<float, 3ul>&)#1}>::"
                         "_M_invoke(std::_Any_data const&, Tensor<float, 3ul>&)",
                      "/usr/include/c++/12/bits/std_function.h", 290)
    sched = t.native(1, "Scheduler<std::function<void (Tensor<float, 3ul>&)> >::operator()(Job&)",
                     "/src/scheduler.h", 19)
    entry = [t.main, t.native(libc, "__libc_start_call_main"), t.native(libc, "__libc_start_main@@GLIBC_2.34"),
             t.native(1, "_start")]
    step = t.raw_stack([t.cudart, pool, lam, invoke, sched] + entry)
    worker = t.raw_stack([t.cudart, pool, t.native(1, "Worker::run(std::stop_token)", "/src/worker.cpp", 12),
                          t.native(cxx, "execute_native_thread_routine"), t.native(libc, "start_thread"),
                          t.native(libc, "clone3")])
    for i in range(4):
        t.alloc(0x10000000 + i * 16 * MiB, 16 * MiB, step)
    t.alloc(0x80000000, 8 * MiB, worker)
    t.close()


def pytest_gc(path):
    """A pytest session under the plugin: test_a leaves two buffers in reference cycles, freed by
    garbage collections after it ended ("gc" records: one during test_b, one at the session's end),
    held until garbage collection, not leaks; test_b keeps one for good (a leak); a collection
    during test_b frees memory of test_b's own (no record changes what a scope freed before its end)."""
    t = Trace(path)
    cycle = t.stack("Buffer::Buffer", 12, python="test_a")
    kept = t.stack("keep_forever", 30, python="test_b")
    scratch = t.stack("scratch", 40, python="test_b")
    t.scope("scope_begin", "test_gc.py::test_a")
    t.alloc(0x10000000, 3 * MiB, cycle)
    t.alloc(0x20000000, 5 * MiB, cycle)
    t.scope("scope_end", "test_gc.py::test_a")
    t.scope("scope_begin", "test_gc.py::test_b")
    t.alloc(0x30000000, 7 * MiB, kept)
    t.alloc(0x40000000, 1 * MiB, scratch)
    began = t.t + 500
    t.free(0x10000000)          # inside the collection below, on its thread
    t.free(0x40000000)          # the test's own scratch: freed before its end anyway
    t.gc(began)
    t.scope("scope_end", "test_gc.py::test_b")
    began = t.t + 500
    t.free(0x20000000)          # the plugin's collect at the session's end
    t.gc(began)
    t.close()


GENERATORS = {"mixed.jsonl": mixed, "blocks.jsonl": blocks, "killed_truncated.jsonl": killed_truncated,
              "pytorch_stacks.jsonl": pytorch_stacks, "stripped_library.jsonl": stripped_library,
              "cpp_templates.jsonl": cpp_templates, "pytest_gc.jsonl": pytest_gc}
# Traces whose text report (the stack view, docs/report.md) is golden too: NAME.expected.txt.
TEXT_GOLDENS = ("pytorch_stacks.jsonl", "stripped_library.jsonl", "cpp_templates.jsonl")


def normalized_report(report_bin, path):
    proc = subprocess.run([report_bin, "--format", "json", path], capture_output=True, text=True)
    data = json.loads(proc.stdout)
    # Paths differ between checkouts: keep the file name only.
    for section in ("processes", "leaks", "held_at_exit", "scopes", "peaks", "ooms", "failed_calls", "growth",
                    "fragmentation", "what_if", "time_to_oom", "top_sites"):
        for entry in data.get(section, []):
            entry["file"] = os.path.basename(entry["file"])
    return data


def normalized_text(report_bin, path, *options):
    """The text report with the trace's path reduced to its name (it differs between checkouts)."""
    proc = subprocess.run([report_bin, *options, path], capture_output=True, text=True)
    return proc.stdout.replace(path, os.path.basename(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
    args = ap.parse_args()
    os.makedirs(GOLDEN, exist_ok=True)
    for name, generate in GENERATORS.items():
        generate(os.path.join(GOLDEN, name))
        if args.update:
            data = normalized_report(os.path.join(args.build, "gpumem-report"), os.path.join(GOLDEN, name))
            with open(os.path.join(GOLDEN, name + ".expected.json"), "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
            if name in TEXT_GOLDENS:
                text = normalized_text(os.path.join(args.build, "gpumem-report"), os.path.join(GOLDEN, name))
                with open(os.path.join(GOLDEN, name + ".expected.txt"), "w") as f:
                    f.write(text)


if __name__ == "__main__":
    main()
