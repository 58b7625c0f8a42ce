#include "server/ipc/wire.h"

#include <cstdint>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace kprof::server {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;

void AppendField(int number, std::string_view bytes, std::string* serialised) {
  // The tag and the length, each a varint of at most 10 bytes, then the bytes.
  uint8_t header[20];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), header);
  end = CodedOutputStream::WriteVarint64ToArray(bytes.size(), end);
  serialised->reserve(serialised->size() + static_cast<size_t>(end - header) + bytes.size());
  serialised->append(reinterpret_cast<const char*>(header), static_cast<size_t>(end - header));
  serialised->append(bytes.data(), bytes.size());
}

void AppendField(int number, const google::protobuf::MessageLite& message,
                 std::string* serialised) {
  AppendField(number, message.SerializeAsString(), serialised);
}

}  // namespace kprof::server
