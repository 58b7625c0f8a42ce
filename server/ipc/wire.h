// Fields appended to a message already serialised. A reader merges every occurrence of a
// field: a message field given twice is merged, a scalar given twice takes the last. So a result
// the worker serialised reaches the client with what the front adds to it (the host's part of
// the environment, the job's timing) without being parsed and serialised again.
#pragma once

#include <string>
#include <string_view>

#include "google/protobuf/message_lite.h"

namespace kprof::server {

// Appends field `number` holding `bytes` (length-delimited: a message's serialised bytes, or a
// string) to `serialised`.
void AppendField(int number, std::string_view bytes, std::string* serialised);

// Appends field `number` holding `message`.
void AppendField(int number, const google::protobuf::MessageLite& message, std::string* serialised);

}  // namespace kprof::server
