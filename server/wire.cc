#include "server/wire.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace kprof::server {

using google::protobuf::internal::WireFormatLite;

void AppendField(int number, std::string_view bytes, std::string* serialised) {
  google::protobuf::io::StringOutputStream stream(serialised);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.WriteTag(WireFormatLite::MakeTag(number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  out.WriteVarint64(bytes.size());
  out.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
}

void AppendField(int number, const google::protobuf::MessageLite& message,
                 std::string* serialised) {
  AppendField(number, message.SerializeAsString(), serialised);
}

}  // namespace kprof::server
