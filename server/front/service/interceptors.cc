#include "server/front/service/interceptors.h"

#include <string>
#include <string_view>

#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace kprof::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class ReflectionAuth final : public grpc::experimental::Interceptor {
 public:
  explicit ReflectionAuth(const TokenAuth* auth) : auth_(auth) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      const auto it = metadata->find("authorization");
      const std::string_view value = it == metadata->end()
                                         ? std::string_view()
                                         : std::string_view(it->second.data(), it->second.size());
      const absl::StatusOr<std::string> client =
          auth_->Check(it == metadata->end() ? nullptr : &value);
      if (!client.ok()) refusal_ = std::string(client.status().message());
    }
    if (!refusal_.empty()) {
      // The service still runs (an interceptor cannot stop it), but on empty requests, and
      // what it would answer goes out empty.
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
        if (void* request = methods->GetRecvMessage()) {
          static_cast<google::protobuf::MessageLite*>(request)->Clear();
        }
      }
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
        if (grpc::ByteBuffer* reply = methods->GetSerializedSendMessage()) {
          grpc::Slice nothing;
          *reply = grpc::ByteBuffer(&nothing, 1);
        }
      }
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, refusal_));
      }
    }
    methods->Proceed();
  }

 private:
  const TokenAuth* auth_;
  std::string refusal_;  // why the call is refused, or "" when it may proceed
};

class ReflectionAuthFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ReflectionAuthFactory(const TokenAuth* auth) : auth_(auth) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string_view method = info->method() != nullptr ? info->method() : "";
    if (method.rfind("/grpc.reflection.", 0) != 0) return nullptr;
    return new ReflectionAuth(auth_);
  }

 private:
  const TokenAuth* auth_;
};

// A unary call whose request did not parse reaches no handler: grpc++ answers it UNIMPLEMENTED.
class MalformedRequest final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequest(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "the request to " + method_ + " is not a valid protobuf message of its type"));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool malformed_ = false;
};

class MalformedRequestFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) return nullptr;
    return new MalformedRequest(info->method() != nullptr ? info->method() : "");
  }
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ServerInterceptors(const TokenAuth* auth) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  if (auth != nullptr) factories.push_back(std::make_unique<ReflectionAuthFactory>(auth));
  factories.push_back(std::make_unique<MalformedRequestFactory>());
  return factories;
}

}  // namespace kprof::server
