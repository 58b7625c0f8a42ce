#include "client/cli/json_input.h"

#include "absl/strings/str_cat.h"

namespace kprof::client {

nlohmann::ordered_json ParseInput(absl::string_view text, bool* too_deep) {
  using Json = nlohmann::ordered_json;
  *too_deep = false;
  const Json::parser_callback_t limit = [too_deep](int depth, Json::parse_event_t event, Json&) {
    if (depth >= kMaxInputDepth &&
        (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start)) {
      *too_deep = true;
      return false;  // skipped, not built
    }
    return true;
  };
  return Json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/false);
}

std::string Echo(const nlohmann::ordered_json& value) {
  constexpr size_t kShown = 60;  // characters (code points), as Python counts them
  const std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  size_t characters = 0, cut = text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) == 0x80) continue;  // a continuation byte
    if (characters++ == kShown) cut = i;
  }
  if (characters <= kShown) return text;
  return absl::StrCat(text.substr(0, cut), "... (", characters, " characters)");
}

}  // namespace kprof::client
