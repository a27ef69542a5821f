// report/allocator_model/recorded_settings.cpp — see recorded_settings.h.
#include "report/allocator_model/recorded_settings.h"

#include <algorithm>

#include "trace/format.h"

namespace gpumemtrace::report::allocator_model {

namespace {
constexpr const char* kFractionOption = "per_process_memory_fraction";
}  // namespace

bool RecordedSettings::apply(const Event& e) {
  namespace f = gpumemtrace::format;
  if (e.api == f::kSettingsSourceMemoryFraction) {
    if (!e.has_fraction || e.device < 0) return false;
    ++records_;
    fractions_[e.device] = e.fraction;
    return true;
  }
  if (e.api != f::kSettingsSourceInForce && e.api != f::kSettingsSourceSetAllocatorSettings) return false;
  ++records_;
  std::vector<std::string> applied, skipped;
  conf_ = apply_recorded_conf(e.label, conf_, &applied, &skipped);
  has_conf_ = true;
  for (const std::string& key : skipped) {
    if (std::find(skipped_.begin(), skipped_.end(), key) == skipped_.end()) skipped_.push_back(key);
  }
  // The option names every device's cap: the per-device ones set before are replaced.
  if (std::find(applied.begin(), applied.end(), kFractionOption) != applied.end()) fractions_.clear();
  return true;
}

AllocatorSettings RecordedSettings::for_device(int32_t device, const AllocatorSettings& base) const {
  AllocatorSettings s = has_conf_ ? conf_ : base;
  s.order = base.order;
  auto it = fractions_.find(device);
  if (it != fractions_.end()) s.memory_fraction = it->second;
  return s;
}

MemoryCap RecordedSettings::cap(int32_t device) const {
  MemoryCap cap;
  auto it = fractions_.find(device);
  if (it != fractions_.end()) {
    cap.fraction = it->second;
    cap.source = gpumemtrace::format::kSettingsSourceMemoryFraction;
  } else if (has_conf_ && conf_.memory_fraction > 0) {
    cap.fraction = conf_.memory_fraction;
    cap.source = kFractionOption;
  }
  return cap;
}

}  // namespace gpumemtrace::report::allocator_model
