#include "core/args/arg_spec.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/args/data_type.h"

namespace kprof::core {
namespace {

class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  absl::StatusOr<ArgSpec> Parse() {
    ArgSpec spec;
    spec.text = std::string(text_);
    const size_t type_end = text_.find_first_of("[:");
    const std::string_view type_name = text_.substr(0, type_end);
    if (type_name.empty()) return Error(0, "expected a data type such as float32");
    absl::StatusOr<DLDataType> dtype = ParseDataType(type_name);
    if (!dtype.ok()) return Error(0, std::string(dtype.status().message()));
    spec.dtype = *dtype;
    pos_ = type_name.size();

    if (Peek('[')) {
      ++pos_;
      if (absl::Status s = ParseDims(spec.shape); !s.ok()) return s;
    }
    if (pos_ < text_.size()) {
      if (!Peek(':')) return Error(pos_, "expected ':' and an initialiser, or the end");
      ++pos_;
      if (absl::Status s = ParseInit(spec); !s.ok()) return s;
    }
    if (absl::Status s = ComputeSize(spec); !s.ok()) return s;
    // arange stores 0 .. n-1: in a float type, the last must be finite.
    if (spec.init == ArgInit::kArange && IsFloat(spec.dtype) && spec.num_elements > 0 &&
        !FitsFloatType(spec.dtype, static_cast<double>(spec.num_elements - 1))) {
      return Error(type_name.size(),
                   absl::StrCat("arange reaches ", spec.num_elements - 1, ", beyond the range of ",
                                DataTypeName(spec.dtype), " (accepted: values up to ",
                                absl::StrFormat("%.6g", LargestFinite(spec.dtype)), ")"));
    }
    return spec;
  }

 private:
  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void SkipSpaces() {
    while (Peek(' ')) ++pos_;
  }

  // "-65504 to 65504, or inf and -inf": what a float type stores.
  static std::string FloatRange(DLDataType type) {
    const std::string largest = absl::StrFormat("%.6g", LargestFinite(type));
    return absl::StrCat("-", largest, " to ", largest, ", or inf and -inf");
  }

  absl::Status Error(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("argument spec '", std::string(text_),
                                                   "': column ", at + 1, ": ", std::string(what)));
  }

  absl::Status ParseDims(std::vector<int64_t>& shape) {
    SkipSpaces();
    if (Peek(']')) {  // `[]`: a scalar
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpaces();
      const size_t start = pos_;
      int64_t dim = 0;
      const char* begin = text_.data() + pos_;
      const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), dim);
      if (end == begin || Peek('-') || Peek('+')) {
        return Error(start, "expected a dimension (a non-negative integer)");
      }
      if (error != std::errc()) return Error(start, "dimension too large");
      pos_ += static_cast<size_t>(end - begin);
      if (shape.size() == kMaxDimensions) {
        return Error(start, absl::StrCat("more than ", kMaxDimensions, " dimensions"));
      }
      shape.push_back(dim);
      SkipSpaces();
      if (Peek(',')) {
        ++pos_;
        continue;
      }
      if (Peek(']')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error(pos_, "expected ',' or ']' after a dimension");
    }
  }

  absl::Status ParseInit(ArgSpec& spec) {
    const std::string_view rest = text_.substr(pos_);
    if (rest == "zeros") {
      spec.init = ArgInit::kZeros;
    } else if (rest == "ones") {
      spec.init = ArgInit::kOnes;
    } else if (rest == "random") {
      spec.init = ArgInit::kRandom;
    } else if (rest == "arange") {
      spec.init = ArgInit::kArange;
    } else if (rest.substr(0, 5) == "fill:") {
      pos_ += 5;
      return ParseFill(spec);
    } else if (!rest.empty() &&
               (std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '-' ||
                rest[0] == '+' || rest[0] == '.' || rest == "true" || rest == "false" ||
                rest == "nan" || rest == "inf" || rest == "-inf")) {
      return ParseFill(spec);
    } else {
      return Error(pos_,
                   "expected an initialiser: zeros, ones, random, arange, fill:VALUE or a value");
    }
    pos_ = text_.size();
    return absl::OkStatus();
  }

  absl::Status ParseFill(ArgSpec& spec) {
    const std::string value(text_.substr(pos_));
    const size_t at = pos_;
    spec.init = ArgInit::kFill;
    pos_ = text_.size();
    const std::string type = DataTypeName(spec.dtype);
    if (value.empty()) return Error(at, "expected a value after 'fill:'");
    if (IsBool(spec.dtype)) {
      if (value == "true" || value == "1") {
        spec.fill.integer = 1;
      } else if (value == "false" || value == "0") {
        spec.fill.integer = 0;
      } else {
        return Error(at, absl::StrCat("'", value, "' is not a bool (accepted: true, false, 1, 0)"));
      }
      return absl::OkStatus();
    }
    if (IsFloat(spec.dtype)) {
      char* end = nullptr;
      errno = 0;
      spec.fill.real = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' ||
          std::isspace(static_cast<unsigned char>(value[0]))) {
        return Error(at, absl::StrCat("'", value, "' is not a number"));
      }
      if ((errno == ERANGE && std::isinf(spec.fill.real)) ||
          (std::isfinite(spec.fill.real) && !FitsFloatType(spec.dtype, spec.fill.real))) {
        return Error(at, absl::StrCat("'", value, "' is beyond the range of ", type,
                                      " (accepted: ", FloatRange(spec.dtype), ")"));
      }
      return absl::OkStatus();
    }
    const int bits = spec.dtype.bits;
    const char* begin = value.data();
    const char* end = value.data() + value.size();
    if (IsSigned(spec.dtype)) {
      const int64_t lo =
          bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
      const int64_t hi =
          bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
      const auto [ptr, error] = std::from_chars(begin, end, spec.fill.integer);
      if (ptr != end || (error != std::errc() && error != std::errc::result_out_of_range)) {
        return Error(at, absl::StrCat("'", value, "' is not an integer"));
      }
      if (error == std::errc::result_out_of_range || spec.fill.integer < lo ||
          spec.fill.integer > hi) {
        return Error(at, absl::StrCat("'", value, "' does not fit ", type, " (accepted: ", lo,
                                      " to ", hi, ")"));
      }
      return absl::OkStatus();
    }
    const uint64_t hi =
        bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
    const auto [ptr, error] = std::from_chars(begin, end, spec.fill.unsigned_integer);
    if (ptr != end || (error != std::errc() && error != std::errc::result_out_of_range)) {
      return Error(at, absl::StrCat("'", value, "' is not a non-negative integer"));
    }
    if (error == std::errc::result_out_of_range || spec.fill.unsigned_integer > hi) {
      return Error(at,
                   absl::StrCat("'", value, "' does not fit ", type, " (accepted: 0 to ", hi, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status ComputeSize(ArgSpec& spec) const {
    int64_t elements = 1;
    for (int64_t dim : spec.shape) {
      if (__builtin_mul_overflow(elements, dim, &elements)) {
        return Error(0, "the element count overflows 64 bits");
      }
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<int64_t>(ElementBytes(spec.dtype)), &bytes)) {
      return Error(0, "the size in bytes overflows 64 bits");
    }
    spec.num_elements = elements;
    spec.num_bytes = static_cast<uint64_t>(bytes);
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<ArgSpec> ParseArgSpec(std::string_view text) { return SpecParser(text).Parse(); }

report::TensorShape ShapeOf(const ArgSpec& spec) {
  report::TensorShape shape{DataTypeName(spec.dtype), spec.shape, ""};
  if (!spec.shape.empty()) return shape;
  switch (spec.init) {
    case ArgInit::kZeros:
    case ArgInit::kArange:
      shape.value = "0";
      break;
    case ArgInit::kOnes:
      shape.value = "1";
      break;
    case ArgInit::kFill:  // as written: "2.5", "1e-3", "true"
      shape.value = spec.text.substr(spec.text.rfind(':') + 1);
      break;
    case ArgInit::kRandom:
      break;
  }
  return shape;
}

}  // namespace kprof::core
