#include "client/cli/json_input.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace kprof::client {
namespace {

using Json = nlohmann::ordered_json;
using google::protobuf::FieldDescriptor;

template <typename T>
bool Fits(const Json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!value.is_number_integer()) return false;
  const int64_t v = value.get<int64_t>();
  return std::numeric_limits<T>::is_signed
             ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                   v <= static_cast<int64_t>(std::numeric_limits<T>::max())
             : v >= 0;
}

// Whether `value` is a plain JSON value of `field`'s scalar type: an integer in range for the
// integer types, a finite number for a double, a boolean, a string (not for bytes), an enum
// value's name.
bool Plain(const FieldDescriptor& field, const Json& value) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return Fits<int32_t>(value);
    case FieldDescriptor::CPPTYPE_INT64:
      return Fits<int64_t>(value);
    case FieldDescriptor::CPPTYPE_UINT32:
      return Fits<uint32_t>(value);
    case FieldDescriptor::CPPTYPE_UINT64:
      return Fits<uint64_t>(value);
    case FieldDescriptor::CPPTYPE_DOUBLE:  // a float's range is protobuf's to check
      return value.is_number() && std::isfinite(value.get<double>());
    case FieldDescriptor::CPPTYPE_BOOL:
      return value.is_boolean();
    case FieldDescriptor::CPPTYPE_STRING:
      return value.is_string() && field.type() != FieldDescriptor::TYPE_BYTES;
    case FieldDescriptor::CPPTYPE_ENUM:
      return value.is_string() &&
             field.enum_type()->FindValueByName(value.get_ref<const std::string&>()) != nullptr;
    default:
      return false;
  }
}

// Sets (or, repeated, adds) `value`, which is Plain for `field`.
void Put(const FieldDescriptor& field, const Json& value, google::protobuf::Message* message) {
  const google::protobuf::Reflection& r = *message->GetReflection();
  const bool add = field.is_repeated();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return add ? r.AddInt32(message, &field, value.get<int32_t>())
                 : r.SetInt32(message, &field, value.get<int32_t>());
    case FieldDescriptor::CPPTYPE_INT64:
      return add ? r.AddInt64(message, &field, value.get<int64_t>())
                 : r.SetInt64(message, &field, value.get<int64_t>());
    case FieldDescriptor::CPPTYPE_UINT32:
      return add ? r.AddUInt32(message, &field, value.get<uint32_t>())
                 : r.SetUInt32(message, &field, value.get<uint32_t>());
    case FieldDescriptor::CPPTYPE_UINT64:
      return add ? r.AddUInt64(message, &field, value.get<uint64_t>())
                 : r.SetUInt64(message, &field, value.get<uint64_t>());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return add ? r.AddDouble(message, &field, value.get<double>())
                 : r.SetDouble(message, &field, value.get<double>());
    case FieldDescriptor::CPPTYPE_BOOL:
      return add ? r.AddBool(message, &field, value.get<bool>())
                 : r.SetBool(message, &field, value.get<bool>());
    case FieldDescriptor::CPPTYPE_STRING:
      return add ? r.AddString(message, &field, value.get<std::string>())
                 : r.SetString(message, &field, value.get<std::string>());
    default: {
      const auto* named = field.enum_type()->FindValueByName(value.get_ref<const std::string&>());
      return add ? r.AddEnum(message, &field, named) : r.SetEnum(message, &field, named);
    }
  }
}

// Sets `field` of `message` to `value` when both are plain: a scalar field (not of a oneof,
// which protobuf refuses twice) given a value of its type, or a repeated one an array of them.
// False, having set nothing, for anything else.
bool SetPlainField(const FieldDescriptor& field, const Json& value,
                   google::protobuf::Message* message) {
  if (field.real_containing_oneof() != nullptr || field.is_map()) return false;
  if (!field.is_repeated()) {
    if (!Plain(field, value)) return false;
    Put(field, value, message);
    return true;
  }
  if (!value.is_array()) return false;
  for (const Json& element : value) {
    if (!Plain(field, element)) return false;
  }
  for (const Json& element : value) Put(field, element, message);
  return true;
}

}  // namespace

absl::Status JsonToMessage(const Json& object, google::protobuf::Message* message) {
  message->Clear();
  const google::protobuf::Descriptor& type = *message->GetDescriptor();
  bool plain = object.is_object();
  for (auto it = object.begin(); plain && it != object.end(); ++it) {
    const FieldDescriptor* field = type.FindFieldByName(it.key());
    if (field == nullptr) {
      field = type.FindFieldByCamelcaseName(it.key());
      if (field != nullptr && field->json_name() != it.key()) field = nullptr;
    }
    plain = field != nullptr && SetPlainField(*field, it.value(), message);
  }
  if (plain) return absl::OkStatus();
  message->Clear();
  const auto parsed = google::protobuf::util::JsonStringToMessage(object.dump(), message);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.message().ToString());
  return absl::OkStatus();
}

nlohmann::ordered_json ParseInput(absl::string_view text, bool* too_deep) {
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
