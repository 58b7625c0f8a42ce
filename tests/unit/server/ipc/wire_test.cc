// Fields appended to a serialised message: every reader merges them into what was there.
#include "server/ipc/wire.h"

#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "kprof/v1/kprof.pb.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {
namespace {

// The worker's result, the host's part of its environment and the job's timing, appended as
// the front does: the client reads one result with the whole manifest and the timing.
TEST(WireTest, AppendedFieldsMergeIntoTheResult) {
  kprof::v1::TimeEvaluateResponse result;
  result.add_seconds_per_call(0.25);
  (*result.mutable_environment()->mutable_metrics())["Load average"].set_string("0.1 0.2 0.3");
  std::string bytes = result.SerializeAsString();

  kprof::v1::MetricMap host;
  (*host.mutable_metrics())["Host"].set_string("bench-1");
  (*host.mutable_metrics())["CPU model"].set_string(std::string(300, 'x'));  // a 2-byte length
  AppendField(kprof::v1::TimeEvaluateResponse::kEnvironmentFieldNumber, host, &bytes);
  kprof::v1::JobTiming timing;
  timing.set_execution_seconds(1.5);
  AppendField(kprof::v1::TimeEvaluateResponse::kTimingFieldNumber, timing, &bytes);

  kprof::v1::TimeEvaluateResponse read;
  ASSERT_TRUE(read.ParseFromString(bytes));
  ASSERT_EQ(read.seconds_per_call_size(), 1);
  EXPECT_EQ(read.seconds_per_call(0), 0.25);
  const auto& metrics = read.environment().metrics();
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics.at("Load average").string(), "0.1 0.2 0.3");
  EXPECT_EQ(metrics.at("Host").string(), "bench-1");
  EXPECT_EQ(metrics.at("CPU model").string(), std::string(300, 'x'));
  EXPECT_EQ(read.timing().execution_seconds(), 1.5);
}

// A field given again: a message's fields merge, scalars take the last; a field number past
// 15 (a two-byte tag) and an empty field are written as well.
TEST(WireTest, ALaterOccurrenceWinsForScalars) {
  kprof::v1::TimeEvaluateResponse result;
  result.mutable_timing()->set_queue_wait_seconds(2);
  result.mutable_timing()->set_execution_seconds(3);
  std::string bytes = result.SerializeAsString();
  kprof::v1::JobTiming later;
  later.set_execution_seconds(4);
  AppendField(kprof::v1::TimeEvaluateResponse::kTimingFieldNumber, later, &bytes);
  AppendField(kprof::v1::TimeEvaluateResponse::kStopReasonFieldNumber, "converged", &bytes);
  AppendField(kprof::v1::TimeEvaluateResponse::kDeviceFieldNumber, "", &bytes);
  kprof::v1::DeviceInfo device;
  device.set_name("H200");
  std::string device_bytes = device.SerializeAsString();
  static_assert(kprof::v1::DeviceInfo::kPciBusIdFieldNumber > 15);
  AppendField(kprof::v1::DeviceInfo::kPciBusIdFieldNumber, "0000:01:00.0", &device_bytes);

  kprof::v1::TimeEvaluateResponse read;
  ASSERT_TRUE(read.ParseFromString(bytes));
  EXPECT_EQ(read.timing().queue_wait_seconds(), 2);
  EXPECT_EQ(read.timing().execution_seconds(), 4);
  EXPECT_EQ(read.stop_reason(), "converged");
  EXPECT_EQ(read.device(), "");
  kprof::v1::DeviceInfo read_device;
  ASSERT_TRUE(read_device.ParseFromString(device_bytes));
  EXPECT_EQ(read_device.name(), "H200");
  EXPECT_EQ(read_device.pci_bus_id(), "0000:01:00.0");
}

// The front's views of the worker's answer and of a batch update read and write the same bytes
// as the messages they stand for: every field under the same number and name, a message field
// seen as bytes (the same wire type) or as the same message, repeated alike.
void ExpectSameWire(const google::protobuf::Descriptor* view,
                    const google::protobuf::Descriptor* real) {
  using google::protobuf::FieldDescriptor;
  ASSERT_EQ(view->field_count(), real->field_count()) << view->full_name();
  for (int i = 0; i < real->field_count(); ++i) {
    const FieldDescriptor* r = real->field(i);
    const FieldDescriptor* v = view->FindFieldByNumber(r->number());
    ASSERT_NE(v, nullptr) << view->full_name() << " lacks field " << r->number();
    EXPECT_EQ(v->name(), r->name()) << view->full_name();
    EXPECT_EQ(v->is_repeated(), r->is_repeated()) << v->full_name();
    EXPECT_EQ(v->containing_oneof() != nullptr, r->containing_oneof() != nullptr) << v->full_name();
    if (r->type() == FieldDescriptor::TYPE_MESSAGE && v->type() == FieldDescriptor::TYPE_BYTES) {
      continue;  // a message kept serialised
    }
    if (r->type() == FieldDescriptor::TYPE_ENUM) {
      ASSERT_EQ(v->type(), FieldDescriptor::TYPE_ENUM) << v->full_name();
      const auto* re = r->enum_type();
      const auto* ve = v->enum_type();
      ASSERT_EQ(ve->value_count(), re->value_count()) << v->full_name();
      for (int k = 0; k < re->value_count(); ++k) {
        EXPECT_EQ(ve->value(k)->name(), re->value(k)->name()) << v->full_name();
        EXPECT_EQ(ve->value(k)->number(), re->value(k)->number()) << v->full_name();
      }
      continue;
    }
    EXPECT_EQ(v->type(), r->type()) << v->full_name();
    if (r->type() == FieldDescriptor::TYPE_MESSAGE && r->message_type() != real) {
      EXPECT_EQ(v->message_type(), r->message_type()) << v->full_name();
    }
  }
}

TEST(WireTest, TheFrontsViewsMatchTheMessagesTheyRead) {
  ExpectSameWire(kprof::worker::v1::WorkerAnswer::descriptor(),
                 kprof::worker::v1::WorkerResponse::descriptor());
  ExpectSameWire(kprof::worker::v1::BatchUpdateWire::descriptor(),
                 kprof::v1::BatchUpdate::descriptor());
  // `more` holds the view itself where BatchUpdate holds BatchUpdate.
  EXPECT_EQ(
      kprof::worker::v1::BatchUpdateWire::descriptor()->FindFieldByName("more")->message_type(),
      kprof::worker::v1::BatchUpdateWire::descriptor());
}

}  // namespace
}  // namespace kprof::server
