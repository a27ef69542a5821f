// report/reader/json_checks.cpp — see json_checks.h.
#include "report/reader/json_checks.h"

#include <algorithm>

#include "trace/format.h"

namespace gpumemtrace::report {

namespace od = simdjson::ondemand;

namespace {

[[noreturn]] void invalid(const char* what) { throw JsonLineError{std::string("not valid JSON (") + what + ")"}; }

// A UTF-8 character boundary at or before `at` in `text`: never inside a multi-byte sequence.
size_t boundary(std::string_view text, size_t at) {
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

void validate_value(od::value& value, int depth) {
  od::json_type type;
  if (value.type().get(type)) invalid("a value");
  if ((type == od::json_type::object || type == od::json_type::array) && depth >= kMaxJsonDepth) {
    throw JsonLineError{"lists or objects nested more than " + std::to_string(kMaxJsonDepth) +
                        " levels deep (the reader's limit, docs/security.md)"};
  }
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object)) invalid("an object");
      for (auto field_result : object) {
        od::field field;
        if (std::move(field_result).get(field)) invalid("an object");
        std::string_view key;
        if (field.unescaped_key().get(key)) invalid("a key");
        od::value inner = field.value();
        validate_value(inner, depth + 1);
      }
      return;
    }
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array)) invalid("a list");
      for (auto element_result : array) {
        od::value element;
        if (std::move(element_result).get(element)) invalid("a list");
        validate_value(element, depth + 1);
      }
      return;
    }
    case od::json_type::string: {
      std::string_view text;
      if (value.get_string().get(text)) invalid("a string");
      return;
    }
    case od::json_type::number: {
      // An integer beyond 64 bits is still a JSON number: read as a double then.
      od::number number;
      double approximate;
      if (value.get_number().get(number) && value.get_double().get(approximate)) invalid("a number");
      return;
    }
    case od::json_type::boolean: {
      bool flag;
      if (value.get_bool().get(flag)) invalid("true or false");
      return;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (value.is_null().get(is_null) || !is_null) invalid("null");
      return;
    }
  }
  invalid("a value");
}

uint64_t parse_exact_size(std::string_view text, std::string_view key, bool* out_of_range) {
  if (out_of_range && text == format::kOutOfRange) {
    *out_of_range = true;
    return UINT64_MAX;
  }
  const std::string field = "field \"" + std::string(key.substr(0, 64)) + "\": ";
  const bool digits = !text.empty() && text.size() <= 20 && (text[0] != '0' || text.size() == 1) &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) throw JsonLineError{field + "expected a decimal number in a string"};
  uint64_t value = 0;
  for (char c : text) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) throw JsonLineError{field + "value out of range"};
    value = value * 10 + digit;
  }
  if (out_of_range) *out_of_range = false;
  return value;
}

int64_t parse_exact_device(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  const uint64_t magnitude = negative ? parse_exact_size(text.substr(1), format::kFieldDeviceExact, nullptr) : 0;
  if (magnitude < 2 || magnitude > uint64_t{1} << 31) {
    throw JsonLineError{"field \"device_exact\": expected a device number below -1, in a string"};
  }
  return -static_cast<int64_t>(magnitude);
}

std::string_view StringLimit::cut(std::string_view text) {
  if (text.size() <= format::kMaxStringBytes) return text;
  const std::string_view mark = format::kCutMark;
  const size_t keep = boundary(text, format::kMaxStringBytes - mark.size());
  std::string& copy = copies_.emplace_back(text.substr(0, keep));
  copy += mark;
  if (current_ < fields_.size()) ++fields_[current_].cuts;
  return copy;
}

void StringLimit::begin_field(std::string_view key) {
  for (current_ = 0; current_ < fields_.size(); ++current_) {
    if (fields_[current_].key == key) {
      fields_[current_].cuts = 0;
      return;
    }
  }
  fields_.push_back(FieldCuts{key, 0});
}

void StringLimit::end_line() {
  // The first field named is the smallest key with a cut: the same whatever the order of the keys.
  const FieldCuts* first = nullptr;
  uint64_t cuts = 0;
  for (const FieldCuts& field : fields_) {
    if (!field.cuts) continue;
    cuts += field.cuts;
    if (!first || field.key < first->key) first = &field;
  }
  if (cuts && count_ == 0) {
    first_line_ = line_;
    first_field_ = std::string(first->key.substr(0, 64));
  }
  count_ += cuts;
  fields_.clear();
  current_ = SIZE_MAX;
}

std::string StringLimit::warning() const {
  if (!count_) return "";
  return std::to_string(count_) + (count_ == 1 ? " string" : " strings") + " longer than " +
         std::to_string(format::kMaxStringBytes) + " bytes cut (they end with \"" + format::kCutMark +
         "\"; the first: field \"" + first_field_ + "\" on line " + std::to_string(first_line_) + ")";
}

}  // namespace gpumemtrace::report
