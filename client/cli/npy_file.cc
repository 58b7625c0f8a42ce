#include "client/cli/npy_file.h"

#include <cstdint>
#include <map>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/read_file.h"
#include "base/status_macros.h"

namespace kprof::client {
namespace {

// NumPy's type strings and the names argument specs use. '|' is "not applicable" (one byte).
const std::map<std::string, std::string>& Types() {
  static const auto* types = new std::map<std::string, std::string>{
      {"|b1", "bool"},   {"|i1", "int8"},    {"<i2", "int16"},   {"<i4", "int32"},
      {"<i8", "int64"},  {"|u1", "uint8"},   {"<u2", "uint16"},  {"<u4", "uint32"},
      {"<u8", "uint64"}, {"<f2", "float16"}, {"<f4", "float32"}, {"<f8", "float64"},
      {"<i1", "int8"},   {"<u1", "uint8"},   {"<b1", "bool"}};
  return *types;
}

size_t Width(const std::string& descr) { return static_cast<size_t>(descr.back() - '0'); }

absl::Status Bad(std::string_view name, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(name), " is not a .npy file kprof reads: ", std::string(why)));
}

}  // namespace

absl::StatusOr<kprof::v1::ExpectedOutput> ParseNpy(std::string_view bytes, std::string_view name) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") {
    return Bad(name, "it does not begin with NumPy's magic string");
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  size_t header_length = 0, start = 0;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) |
                    static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(name, "its header is cut short");
    for (int i = 3; i >= 0; --i) {
      header_length = header_length << 8 | static_cast<unsigned char>(bytes[8 + i]);
    }
    start = 12;
  } else {
    return Bad(name, absl::StrCat("format version ", major, " (accepted: 1, 2 and 3)"));
  }
  if (bytes.size() < start + header_length) return Bad(name, "its header is cut short");
  const std::string header(bytes.substr(start, header_length));
  static const std::regex kDescr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex kFortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex kShape(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch descr, fortran, shape;
  if (!std::regex_search(header, descr, kDescr) || !std::regex_search(header, fortran, kFortran) ||
      !std::regex_search(header, shape, kShape)) {
    return Bad(name, "its header lacks descr, fortran_order or shape");
  }
  const auto type = Types().find(descr[1].str());
  if (type == Types().end()) {
    return Bad(name, absl::StrCat("element type '", descr[1].str(),
                                  "' (accepted: little-endian bool, int8 to int64, uint8 to "
                                  "uint64, float16, float32, float64)"));
  }
  if (fortran[1].str() == "True") {
    return Bad(name, "it is in Fortran order (save a C-order array: numpy.ascontiguousarray)");
  }
  kprof::v1::ExpectedOutput out;
  out.set_dtype(type->second);
  int64_t elements = 1;
  for (absl::string_view dim : absl::StrSplit(shape[1].str(), ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(dim, "L")), &d) || d < 0) {
      return Bad(name, absl::StrCat("its shape (", shape[1].str(), ") is not one of sizes"));
    }
    out.add_shape(d);
    elements *= d;
  }
  const size_t data_bytes = static_cast<size_t>(elements) * Width(type->first);
  const std::string_view data = bytes.substr(start + header_length);
  if (data.size() != data_bytes) {
    return Bad(name, absl::StrCat("it holds ", data.size(), " bytes of data where its header's ",
                                  elements, " elements take ", data_bytes));
  }
  out.set_data(std::string(data));
  return out;
}

absl::StatusOr<kprof::v1::ExpectedOutput> ReadNpyFile(const std::string& path) {
  KPROF_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path));
  return ParseNpy(bytes, path);
}

}  // namespace kprof::client
