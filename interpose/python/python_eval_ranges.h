// interpose/python/python_eval_ranges.h — where the interpreter's eval loop lives in memory, so that
// merge_stacks() can tell which native frames are `_PyEval_EvalFrameDefault` (each stands for one run
// of Python frames).
//
// The ranges come from the ELF symbol tables (.symtab when present, else .dynsym) of the object that
// holds `_PyEval_EvalFrameDefault`, including compiler-split parts such as
// `_PyEval_EvalFrameDefault.cold`: dladdr() misses those local symbols. Found by name, never by a
// heuristic.
//
// Thread-safety: find_eval_ranges() builds the set once (it reads a file and allocates: writer thread
// only, never the hot path); is_eval_ip() is read-only afterwards.
#pragma once

#include <cstdint>
#include <vector>

namespace gpumemtrace::python {

struct AddressRange {
  uintptr_t begin;
  uintptr_t end;  // exclusive
};

// Ranges of every `_PyEval_EvalFrameDefault*` symbol in the loaded object containing `eval_fn`
// (the address dlsym returned). Empty when the object cannot be read; then callers fall back to
// dladdr() on the exported symbol.
std::vector<AddressRange> find_eval_ranges(const void* eval_fn);

}  // namespace gpumemtrace::python
