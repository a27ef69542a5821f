// report/analyses/advice.cpp — the advice table (advice.h, docs/report.md).
#include "report/analyses/advice.h"

#include <cstdio>

#include "report/analyses/oom_incidents.h"
#include "report/analyses/roles.h"
#include "trace/torch_actions.h"

namespace gpumemtrace::report {
namespace {

constexpr double kActivationsShare = 0.5;
constexpr double kOptimizerShare = 0.3;

double share(const RoleSplit& split, Role role) {
  const uint64_t total = split.total();
  return total ? static_cast<double>(split.bytes[static_cast<size_t>(role)]) / static_cast<double>(total) : 0.0;
}

std::string percent(double value) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", value * 100.0);
  return text;
}

// The role rules shared by capacity OOMs and peaks; "" when neither holds.
std::string role_advice(const RoleSplit& split, const char* where) {
  const double activations = share(split, Role::Activations);
  const double optimizer = share(split, Role::OptimizerState);
  if (activations >= kActivationsShare) {
    return "activations hold " + percent(activations) + " of the memory " + where +
           ": use a smaller batch, activation checkpointing (torch.utils.checkpoint), or mixed precision "
           "(torch.autocast)";
  }
  if (optimizer >= kOptimizerShare) {
    return "optimizer state holds " + percent(optimizer) + " of the memory " + where +
           ": use a lighter optimizer (SGD, Adafactor, 8-bit Adam) or shard it (ZeRO, FSDP)";
  }
  return "";
}

bool has_python_frame(const Stack& stack) {
  for (const LogicalFrame& f : stack) {
    if (f.python) return true;
  }
  return false;
}

// Allocated inside a module's forward(): an activation kept alive.
bool has_forward_frame(const Stack& stack) {
  for (const LogicalFrame& f : stack) {
    if (f.python && (function_is(f, "forward") || function_is(f, "_call_impl"))) return true;
  }
  return false;
}

bool is_torch_incident(const OomReport& oom) {
  for (const OomAttempt& a : oom.attempts) {
    if (torch_actions::is_torch_api(a.api)) return true;
  }
  return false;
}

std::string oom_advice(const OomReport& oom) {
  switch (oom.verdict) {
    case Verdict::Fragmentation:
      if (oom.has_address_gaps) {  // holes between plain allocations, no allocator of blocks
        return "the device's free memory lies in holes that freed allocations left between live ones, none as "
               "large as the request: allocate the largest buffers first, or keep one buffer and reuse it "
               "instead of freeing and allocating around long-lived ones";
      }
      // A PyTorch incident gets a setting named only by the what-if replay, when it shows the setting
      // helps (what_if.h); this is the advice without one.
      return is_torch_incident(oom)
                 ? "free memory is split into blocks too small for the request: allocate the largest tensors "
                   "first, or free the cache at a quiet point (torch.cuda.empty_cache())"
                 : "free memory is split into blocks too small for the request: allocate the largest "
                   "buffers first, or let the allocator release and merge its free blocks";
    case Verdict::AllocatorLimit:
      if (oom.cap_fraction > 0) {
        return "the allocator's own cap refused it: " + cap_text(oom.cap_fraction, oom.cap_bytes, oom.cap_source) +
               " (the trace's record); raise or remove it";
      }
      return "the allocator's own cap refused it: raise or remove the cap (torch.cuda."
             "set_per_process_memory_fraction, PYTORCH_CUDA_ALLOC_CONF, or the memory pool's maximum)";
    case Verdict::OtherProcesses:
      return "other processes hold most of this device: check them (nvidia-smi) and stop or move them, or "
             "pick another device (CUDA_VISIBLE_DEVICES)";
    case Verdict::Capacity:
      if (oom.device_total && oom.requested > oom.device_total) {
        return "the request alone is larger than the device: split the work into smaller pieces";
      }
      return role_advice(oom.roles, "at the OOM");
    case Verdict::NotEnoughInformation:
      return "";
  }
  return "";
}

}  // namespace

void add_advice(ProcessReport& report) {
  for (OomReport& oom : report.ooms) oom.advice = oom_advice(oom);
  for (PeakReport& peak : report.peaks) {
    if (peak.has_roles) peak.advice = role_advice(peak.roles, "at the peak");
  }
  for (GrowthReport& g : report.growth) {
    if (g.level == Level::Block && has_forward_frame(g.stack)) {
      g.advice = "a tensor that requires grad is accumulated across iterations (e.g. `total += loss`, "
                 "`losses.append(loss)`): "
                 "accumulate `loss.item()` or `loss.detach()`, and run evaluation under torch.no_grad()";
    } else if (g.level == Level::Block && has_python_frame(g.stack)) {
      g.advice = "tensors created here stay referenced across iterations (a list, a global, or the autograd "
                 "graph of a kept output): drop the references at the end of each iteration";
    } else {
      g.advice = "memory allocated here is kept every iteration: free it at the end of the iteration, or "
                 "reuse one buffer";
    }
  }
  for (ScopeReport& scope : report.scopes) {
    if (scope.leaked_bytes) {
      scope.advice = "memory allocated in this scope outlives it: a module-level cache, a global or a "
                     "longer-lived fixture keeps it; release it (del, clear the cache) before the scope ends";
    }
  }
}

}  // namespace gpumemtrace::report
