#include "base/command_line.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "base/nearest.h"

namespace kprof::base {
namespace {

absl::Status Wants(const std::string& name, std::string_view what, const std::string& value) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " wants ", std::string(what), ", got '", value, "'"));
}

}  // namespace

void CommandLine::AddString(std::string name, std::string* out, std::string value_name,
                            std::string help) {
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out](const std::string& v) {
         *out = v;
         return absl::OkStatus();
       }});
}

void CommandLine::AddInt(std::string name, int64_t* out, std::string value_name, std::string help) {
  const std::string n = name;
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out, n](const std::string& v) {
         if (!absl::SimpleAtoi(v, out)) return Wants(n, "an integer", v);
         return absl::OkStatus();
       }});
}

void CommandLine::AddUint(std::string name, uint64_t* out, std::string value_name,
                          std::string help) {
  const std::string n = name;
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out, n](const std::string& v) {
         if (v.empty() || v[0] == '-' || !absl::SimpleAtoi(v, out)) {
           return Wants(n, "a non-negative integer", v);
         }
         return absl::OkStatus();
       }});
}

void CommandLine::AddBytes(std::string name, uint64_t* out, std::string value_name,
                           std::string help) {
  const std::string n = name;
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out, n](const std::string& v) {
         const std::optional<uint64_t> bytes = ParseByteSize(v);
         if (!bytes.has_value()) return Wants(n, kByteSizeForms, v);
         *out = *bytes;
         return absl::OkStatus();
       }});
}

void CommandLine::AddDouble(std::string name, double* out, std::string value_name,
                            std::string help) {
  const std::string n = name;
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out, n](const std::string& v) {
         if (!absl::SimpleAtod(v, out)) return Wants(n, "a number", v);
         return absl::OkStatus();
       }});
}

void CommandLine::AddDuration(std::string name, absl::Duration* out, std::string value_name,
                              std::string help) {
  const std::string n = name;
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out, n](const std::string& v) {
         double seconds = 0;
         if (absl::SimpleAtod(v, &seconds)) {
           *out = absl::Seconds(seconds);
         } else if (!absl::ParseDuration(v, out)) {
           return Wants(n, "a duration such as 60s, 500ms or 2m", v);
         }
         if (*out < absl::ZeroDuration()) return Wants(n, "a positive duration", v);
         return absl::OkStatus();
       }});
}

void CommandLine::AddFlag(std::string name, bool* out, std::string help) {
  options_.push_back({std::move(name), "", std::move(help), [out](const std::string&) {
                        *out = true;
                        return absl::OkStatus();
                      }});
}

void CommandLine::AddRepeated(std::string name, std::vector<std::string>* out,
                              std::string value_name, std::string help) {
  options_.push_back(
      {std::move(name), std::move(value_name), std::move(help), [out](const std::string& v) {
         out->push_back(v);
         return absl::OkStatus();
       }});
}

CommandLine::Option* CommandLine::Find(const std::string& name) {
  for (Option& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

bool CommandLine::Given(const std::string& name) const {
  for (const Option& o : options_) {
    if (o.name == name) return o.given;
  }
  return false;
}

absl::Status CommandLine::Parse(const std::vector<std::string>& args,
                                std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional->insert(positional->end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      positional->push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name =
        arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    Option* option = Find(name);
    if (option == nullptr) {
      std::vector<std::string> names;
      for (const Option& known : options_) names.push_back(known.name);
      const std::string near = Nearest(name, names);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '--", name, "' (",
                       near.empty() ? "" : absl::StrCat("did you mean --", near, "? "), program_,
                       " --help lists them)"));
    }
    std::string value;
    if (option->value_name.empty()) {
      if (equals != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
    } else if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " wants a value (", option->value_name, ")"));
    }
    if (absl::Status s = option->set(value); !s.ok()) return s;
    option->given = true;
  }
  return absl::OkStatus();
}

std::string CommandLine::Help() const {
  size_t width = 0;
  std::vector<std::string> left;
  for (const Option& o : options_) {
    left.push_back(absl::StrCat("--", o.name, o.value_name.empty() ? "" : " ", o.value_name));
    width = std::max(width, left.back().size());
  }
  std::string out;
  for (size_t i = 0; i < options_.size(); ++i) {
    absl::StrAppend(&out, "  ", left[i], std::string(width - left[i].size() + 3, ' '),
                    options_[i].help, "\n");
  }
  return out;
}

}  // namespace kprof::base
