#include "proto/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::wire {

int32_t ToWireCode(absl::StatusCode code) { return static_cast<int32_t>(code); }

absl::Status StatusFromWire(int32_t code, absl::string_view message) {
  constexpr int32_t kLastCode = static_cast<int32_t>(absl::StatusCode::kUnauthenticated);
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > kLastCode) {
    return absl::InternalError(absl::StrCat("status code ", code, " is not one (0-", kLastCode,
                                            "); its message: ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

absl::Status StatusFromWire(
    int32_t code, absl::string_view message,
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& details) {
  absl::Status status = StatusFromWire(code, message);
  if (status.ok()) return status;
  for (const google::protobuf::Any& detail : details) {
    status.SetPayload(detail.type_url(), absl::Cord(detail.value()));
  }
  return status;
}

void DetailsToProto(const absl::Status& status,
                    google::protobuf::RepeatedPtrField<google::protobuf::Any>* details) {
  status.ForEachPayload([details](absl::string_view type_url, const absl::Cord& value) {
    google::protobuf::Any* detail = details->Add();
    detail->set_type_url(std::string(type_url));
    detail->set_value(std::string(value));
  });
}

std::string RichStatusBytes(const absl::Status& status) {
  kprof::v1::RichStatus rich;
  DetailsToProto(status, rich.mutable_details());
  if (rich.details_size() == 0) return "";
  rich.set_code(ToWireCode(status.code()));
  rich.set_message(std::string(status.message()));
  return rich.SerializeAsString();
}

absl::Status StatusFromRichStatus(int32_t code, absl::string_view message,
                                  absl::string_view bytes) {
  kprof::v1::RichStatus rich;
  if (bytes.empty() || !rich.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return StatusFromWire(code, message);
  }
  return StatusFromWire(code, message, rich.details());
}

absl::Status MissingModuleError(absl::string_view id, absl::string_view reason) {
  absl::Status status = absl::NotFoundError(absl::StrCat(
      "unknown module ", id, reason.empty() ? "" : " (", reason, reason.empty() ? "" : ")"));
  kprof::v1::MissingModule detail;
  detail.set_module_id(std::string(id));
  status.SetPayload(kMissingModuleType, absl::Cord(detail.SerializeAsString()));
  return status;
}

std::string MissingModule(const absl::Status& status) {
  if (!absl::IsNotFound(status)) return "";
  const auto payload = status.GetPayload(kMissingModuleType);
  kprof::v1::MissingModule detail;
  if (!payload || !detail.ParseFromString(std::string(*payload))) return "";
  return detail.module_id();
}

}  // namespace kprof::wire
