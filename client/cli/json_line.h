// JsonLine: compact JSON written straight into a string, for the result lines a batch writes by
// the thousand — building a document per line cost more than measuring a nop. The text is what
// nlohmann::json's dump() writes for the same values: numbers formatted by its Grisu2 (NaN and
// the infinities as null), strings escaped as it escapes them (UTF-8 kept).
//
//   JsonLine w;
//   w.Open().Key("id").String("k0").Key("results").Numbers(seconds).Close();
//   Print(w.text() + "\n");
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kprof::client {

class JsonLine {
 public:
  JsonLine() { out_.reserve(2048); }  // a batch's result line, mostly

  JsonLine& Open() { return Begin('{'); }
  JsonLine& Close() { return End('}'); }
  JsonLine& OpenArray() { return Begin('['); }
  JsonLine& CloseArray() { return End(']'); }

  // An object's key; its value follows.
  JsonLine& Key(std::string_view key) {
    if (comma_) out_.push_back(',');
    Escaped(key);
    out_.push_back(':');
    comma_ = false;
    return *this;
  }

  JsonLine& String(std::string_view text) {
    Comma();
    Escaped(text);
    return *this;
  }
  JsonLine& Number(double value) {
    Comma();
    if (!std::isfinite(value)) {
      out_ += "null";
    } else {
      char buffer[64];
      out_.append(buffer, nlohmann::detail::to_chars(buffer, buffer + sizeof buffer, value));
    }
    return *this;
  }
  JsonLine& Integer(int64_t value) {
    Comma();
    absl::StrAppend(&out_, value);
    return *this;
  }
  JsonLine& Bool(bool value) {
    Comma();
    out_ += value ? "true" : "false";
    return *this;
  }
  JsonLine& Null() {
    Comma();
    out_ += "null";
    return *this;
  }
  // JSON text written as it is, as one value.
  JsonLine& Raw(std::string_view json) {
    Comma();
    out_.append(json);
    return *this;
  }

  // An array of each element of `values` (doubles, integers or strings).
  template <typename Range>
  JsonLine& Numbers(const Range& values) {
    OpenArray();
    for (const double v : values) Number(v);
    return CloseArray();
  }
  template <typename Range>
  JsonLine& Integers(const Range& values) {
    OpenArray();
    for (const auto v : values) Integer(static_cast<int64_t>(v));
    return CloseArray();
  }
  template <typename Range>
  JsonLine& Strings(const Range& values) {
    OpenArray();
    for (const auto& v : values) String(v);
    return CloseArray();
  }

  const std::string& text() const { return out_; }
  std::string& text() { return out_; }

 private:
  void Comma() {
    if (comma_) out_.push_back(',');
    comma_ = true;
  }
  JsonLine& Begin(char bracket) {
    Comma();
    out_.push_back(bracket);
    comma_ = false;
    return *this;
  }
  JsonLine& End(char bracket) {
    out_.push_back(bracket);
    comma_ = true;
    return *this;
  }
  // As nlohmann's dump_escaped with ensure_ascii off: quotes, backslashes and control
  // characters escaped, every other byte as it is.
  void Escaped(std::string_view text) {
    out_.push_back('"');
    size_t plain = 0;  // the start of the run of bytes written as they are
    for (size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_.append(text.data() + plain, i - plain);
      plain = i + 1;
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default: {
          static constexpr char kHex[] = "0123456789abcdef";
          const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
          out_.append(escaped, sizeof escaped);
        }
      }
    }
    out_.append(text.data() + plain, text.size() - plain);
    out_.push_back('"');
  }

  std::string out_;
  bool comma_ = false;  // a value was written: the next one needs a comma before it
};

}  // namespace kprof::client
