// interpose/hooks/nvtx_memory.h — the NVTX memory extension (nvToolsExtMem.h) as block events: what
// nvtx.cpp, which owns the injection entry points, hands over to nvtx_memory.cpp.
#pragma once

#include <stdint.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>

namespace gpumemtrace {

// Fills the memory extension's function slots of one NVTX copy. False when `module` is not the
// memory extension in a version this file understands (NVTX then leaves its calls as no-ops).
bool attach_nvtx_memory(nvtxExtModuleInfo_t* module) noexcept;

// An NVTX message (nvtxMessageType_t `type`, `value`) as an interned UTF-8 string (never freed);
// null when it is empty, of an unknown type, or the label table is full. Defined in nvtx.cpp.
const char* nvtx_interned_message(int32_t type, const nvtxMessageValue_t& value) noexcept;

}  // namespace gpumemtrace
