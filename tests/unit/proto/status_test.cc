#include "proto/status.h"

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.pb.h"
#include "status_matchers.h"

namespace kprof::wire {
namespace {

using ::kprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(StatusCodec, EveryCodeCrossesAsItsGrpcNumber) {
  for (int code = 0; code <= 16; ++code) {
    const auto absl_code = static_cast<absl::StatusCode>(code);
    EXPECT_EQ(ToWireCode(absl_code), code);
    const absl::Status back = StatusFromWire(code, "why");
    EXPECT_EQ(back.code(), absl_code);
    if (code != 0) {
      EXPECT_EQ(back.message(), "why");
    }
  }
  EXPECT_EQ(ToWireCode(absl::StatusCode::kNotFound), 5);  // gRPC's NOT_FOUND
}

TEST(StatusCodec, ANumberThatIsNoCodeIsInternalNamingIt) {
  for (int32_t bad : {-1, 17, 1000, INT32_MIN}) {
    EXPECT_THAT(StatusFromWire(bad, "the worker's words"),
                StatusIs(absl::StatusCode::kInternal,
                         AllOf(HasSubstr(absl::StrCat("status code ", bad, " is not one (0-16)")),
                               HasSubstr("the worker's words"))))
        << bad;
  }
}

TEST(MissingModule, TheDetailNotTheWordsSaysWhichModule) {
  const std::string id(64, 'a');
  const absl::Status missing = MissingModuleError(id, "upload it first");
  EXPECT_THAT(missing,
              StatusIs(absl::StatusCode::kNotFound, "unknown module " + id + " (upload it first)"));
  EXPECT_EQ(MissingModule(missing), id);
  // The same words without the detail are not read as one...
  EXPECT_EQ(MissingModule(absl::NotFoundError(missing.message())), "");
  // ...nor is the detail on another code.
  absl::Status other = absl::InternalError("x");
  other.SetPayload(kMissingModuleType, *missing.GetPayload(kMissingModuleType));
  EXPECT_EQ(MissingModule(other), "");
  EXPECT_THAT(MissingModuleError(id, ""),
              StatusIs(absl::StatusCode::kNotFound, "unknown module " + id));
}

TEST(MissingModule, CrossesABatchUpdateAndARichStatus) {
  const std::string id(64, 'b');
  const absl::Status missing = MissingModuleError(id, "evicted");

  kprof::v1::BatchUpdate update;
  update.set_code(ToWireCode(missing.code()));
  update.set_message(std::string(missing.message()));
  DetailsToProto(missing, update.mutable_details());
  ASSERT_EQ(update.details_size(), 1);
  EXPECT_EQ(update.details(0).type_url(), "type.googleapis.com/kprof.v1.MissingModule");
  EXPECT_EQ(MissingModule(StatusFromWire(update.code(), update.message(), update.details())), id);

  // The rich status reads as google.rpc.Status does: code, message, details.
  const std::string bytes = RichStatusBytes(missing);
  kprof::v1::RichStatus rich;
  ASSERT_TRUE(rich.ParseFromString(bytes));
  EXPECT_EQ(rich.code(), 5);
  EXPECT_EQ(rich.message(), missing.message());
  kprof::v1::MissingModule detail;
  ASSERT_EQ(rich.details_size(), 1);
  ASSERT_TRUE(rich.details(0).UnpackTo(&detail));
  EXPECT_EQ(detail.module_id(), id);
  EXPECT_EQ(MissingModule(StatusFromRichStatus(5, missing.message(), bytes)), id);
}

TEST(RichStatus, OnlyAStatusWithDetailsHasOneAndJunkIsIgnored) {
  EXPECT_EQ(RichStatusBytes(absl::NotFoundError("plain")), "");
  EXPECT_THAT(StatusFromRichStatus(5, "plain", ""), StatusIs(absl::StatusCode::kNotFound, "plain"));
  const absl::Status junk = StatusFromRichStatus(5, "plain", "\xff\xff\xff");
  EXPECT_THAT(junk, StatusIs(absl::StatusCode::kNotFound, "plain"));
  EXPECT_EQ(MissingModule(junk), "");
}

}  // namespace
}  // namespace kprof::wire
