// Statuses on the wire: the one codec for a code that crosses a process boundary as a number
// (the worker link, a BatchUpdate, a gRPC status) and for the structured details a program acts
// on (MissingModule), which travel as absl::Status payloads inside each process. gRPC-free: the
// worker links it, and the client and the front turn grpc::Status into these and back.
//
//   absl::Status s = wire::MissingModuleError(id, "upload it first");  // NOT_FOUND + detail
//   update.set_code(wire::ToWireCode(s.code()));  wire::DetailsToProto(s,
//   update.mutable_details());
//   ...
//   absl::Status back = wire::StatusFromWire(update.code(), update.message(), update.details());
//   if (std::string id = wire::MissingModule(back); !id.empty()) Reupload(id);
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace kprof::wire {

// A status code as gRPC numbers it (absl::StatusCode shares the numbers).
int32_t ToWireCode(absl::StatusCode code);

// The status a code and message from the wire stand for. A number that is no status code (a
// newer or broken peer) is INTERNAL naming the number and keeping the message: never a cast to a
// value the enum lacks. 0 is OK, whatever the message.
absl::Status StatusFromWire(int32_t code, absl::string_view message);

// The same with the details of a BatchUpdate or RichStatus, which become payloads.
absl::Status StatusFromWire(
    int32_t code, absl::string_view message,
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& details);

// A status's payloads as Any details (type URL and bytes as they are).
void DetailsToProto(const absl::Status& status,
                    google::protobuf::RepeatedPtrField<google::protobuf::Any>* details);

// The serialised RichStatus (google.rpc.Status) of a status with details, for a gRPC status's
// error details; "" when it has none. StatusFromRichStatus reads one back: `bytes` empty or not
// a RichStatus leaves the code and message alone, without details.
std::string RichStatusBytes(const absl::Status& status);
absl::Status StatusFromRichStatus(int32_t code, absl::string_view message, absl::string_view bytes);

// NOT_FOUND "unknown module ID (REASON)" with a MissingModule detail naming ID.
inline constexpr char kMissingModuleType[] = "type.googleapis.com/kprof.v1.MissingModule";
absl::Status MissingModuleError(absl::string_view id, absl::string_view reason);

// The module a status says the daemon does not hold (its MissingModule detail), or "".
std::string MissingModule(const absl::Status& status);

}  // namespace kprof::wire
