#include "core/args/arguments.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/args/data_type.h"
#include "core/args/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

std::vector<uint8_t> Bytes(const std::string& spec_text, uint64_t seed = 0, uint64_t index = 0) {
  const ArgSpec spec = *ParseArgSpec(spec_text);
  std::vector<uint8_t> bytes(spec.num_bytes);
  InitializeHostBytes(spec, seed, index, bytes.data());
  return bytes;
}

TEST(RandomBits, IsSplitMix64AsDocumented) {
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(RandomBits(0, 0, 0), 0x238275bc38fcbe91ULL);
}

// The expected bytes come from an independent implementation of the documented generator.
TEST(InitializeHostBytes, RandomDataIsTheSameBytesOnEveryHost) {
  EXPECT_THAT(Bytes("float32[4]:random"),
              ElementsAre(0xd4, 0x09, 0x0e, 0x3e, 0x9c, 0xca, 0x3c, 0x3e, 0x4c, 0x8c, 0x32, 0x3f,
                          0x0c, 0x70, 0xa4, 0x3e));
  EXPECT_THAT(Bytes("float64[2]:random", 0, 1),
              ElementsAre(0x9e, 0x31, 0x40, 0x60, 0x6e, 0x39, 0xd1, 0x3f, 0x86, 0xf1, 0x63, 0x65,
                          0xe4, 0x94, 0xd1, 0x3f));
  EXPECT_THAT(Bytes("int32[4]:random", 42),
              ElementsAre(0x06, 0, 0, 0, 0x0b, 0, 0, 0, 0x0d, 0, 0, 0, 0x02, 0, 0, 0));
  EXPECT_THAT(Bytes("bool[8]:random", 7, 2), ElementsAre(1, 0, 1, 1, 1, 0, 0, 1));
  EXPECT_THAT(Bytes("float16[4]:random"),
              ElementsAre(0x70, 0x30, 0xe6, 0x31, 0x94, 0x39, 0x23, 0x35));
}

TEST(InitializeHostBytes, RandomDependsOnSeedAndArgumentAndStaysInRange) {
  EXPECT_NE(Bytes("float32[16]:random", 0), Bytes("float32[16]:random", 1));
  EXPECT_NE(Bytes("float32[16]:random", 0, 0), Bytes("float32[16]:random", 0, 1));
  const std::vector<uint8_t> f = Bytes("float32[4096]:random", 3);
  for (size_t i = 0; i < 4096; ++i) {
    float v;
    std::memcpy(&v, f.data() + 4 * i, 4);
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
  }
  for (uint8_t b : Bytes("uint8[4096]:random", 3)) ASSERT_LT(b, 16);
  for (uint8_t b : Bytes("bfloat16[2048]:random", 3)) (void)b;
  const std::vector<uint8_t> h = Bytes("float16[4096]:random", 5);
  for (size_t i = 0; i < 4096; ++i) {
    uint16_t v;
    std::memcpy(&v, h.data() + 2 * i, 2);
    ASSERT_LT(v, 0x3C00) << "float16 random must stay below 1.0";
  }
}

TEST(InitializeHostBytes, ZerosOnesArangeAndFillPerType) {
  EXPECT_THAT(Bytes("int16[2]:ones"), ElementsAre(1, 0, 1, 0));
  EXPECT_THAT(Bytes("float16[1]:ones"), ElementsAre(0x00, 0x3C));
  EXPECT_THAT(Bytes("bfloat16[1]:ones"), ElementsAre(0x80, 0x3F));
  EXPECT_THAT(Bytes("bool[2]:ones"), ElementsAre(1, 1));
  EXPECT_THAT(Bytes("float64[2]:zeros"), ElementsAreArray(std::vector<uint8_t>(16, 0)));
  EXPECT_THAT(Bytes("uint8[4]:arange"), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Bytes("bool[3]:arange"), ElementsAre(0, 1, 1));
  EXPECT_EQ(Bytes("int8[300]:arange")[200], 0xC8);  // 200 wraps to -56
  EXPECT_THAT(Bytes("int32[2]:fill:-2"),
              ElementsAre(0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF));
  EXPECT_THAT(Bytes("uint64:18446744073709551615"),
              ElementsAreArray(std::vector<uint8_t>(8, 0xFF)));
  EXPECT_THAT(Bytes("float32:2.5"), ElementsAre(0x00, 0x00, 0x20, 0x40));
  EXPECT_THAT(Bytes("bool[2]:fill:true"), ElementsAre(1, 1));
  const std::vector<uint8_t> arange = Bytes("float32[3]:arange");
  float values[3];
  std::memcpy(values, arange.data(), sizeof values);
  EXPECT_THAT(values, ElementsAre(0.0f, 1.0f, 2.0f));
}

TEST(FloatConversions, HalfAndBfloat16Round) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(FloatToHalf(65520.0f, /*toward_zero=*/true), 0x7BFF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7E00, 0x7E00);
  EXPECT_EQ(FloatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBfloat16(3.0f), 0x4040);
  EXPECT_EQ(FloatToBfloat16(1.00390625f), 0x3F80);  // a tie rounds to even
  EXPECT_EQ(FloatToBfloat16(1.01171875f), 0x3F82);  // a tie rounds to even, upwards
}

// From a double, rounded once: a value just past a tie goes to the nearer neighbour, where a
// detour through float would land on the tie and round to even.
TEST(FloatConversions, DoublesRoundOnceToTheNearest) {
  EXPECT_EQ(DoubleToHalf(2049.0), 0x6800);        // a tie: to even, 2048
  EXPECT_EQ(DoubleToHalf(2049.0000001), 0x6801);  // 2050 is nearer
  EXPECT_EQ(DoubleToHalf(2048.9999999), 0x6800);
  EXPECT_EQ(DoubleToBfloat16(1.00390625), 0x3F80);          // a tie: to even, 1.0
  EXPECT_EQ(DoubleToBfloat16(1.0039062500000002), 0x3F81);  // 1.0078125 is nearer
  EXPECT_EQ(DoubleToBfloat16(16908287.0), 0x4B81);          // 16908288
  EXPECT_EQ(DoubleToBfloat16(16777217.0), 0x4B80);          // 16777216
  EXPECT_EQ(DoubleToHalf(-0.0), 0x8000);
  EXPECT_EQ(DoubleToHalf(65519.99), 0x7BFF);  // 65504
  EXPECT_EQ(DoubleToHalf(65520.0), 0x7C00);   // a tie with infinity rounds to it
  EXPECT_EQ(DoubleToHalf(1e300, /*toward_zero=*/true), 0x7BFF);
  EXPECT_EQ(DoubleToHalf(-1e300), 0xFC00);
  // Subnormals: the smallest, a tie below it, just past that tie, and the carry to a normal.
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25) * 1.0000001), 0x0001);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1023.5, -24)), 0x0400);  // rounds up to the least normal
  EXPECT_EQ(DoubleToHalf(1e-300), 0x0000);
  EXPECT_EQ(DoubleToBfloat16(std::ldexp(1.0, -133)), 0x0001);  // bfloat16's smallest subnormal
  EXPECT_EQ(DoubleToBfloat16(INFINITY), 0x7F80);
  EXPECT_EQ(DoubleToBfloat16(NAN) & 0x7FC0, 0x7FC0);
  // Every float16 converts back to itself.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const int exponent = static_cast<int>(h >> 10);
    const double mantissa = static_cast<double>(h & 0x3FF);
    const double value =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(DoubleToHalf(value), h) << value;
  }
}

// Values are stored as asked: a fill and an arange in float16 and bfloat16 round once.
TEST(InitializeHostBytes, HalfPrecisionValuesRoundOnce) {
  EXPECT_THAT(Bytes("float16:2049.0000001"), ElementsAre(0x01, 0x68));
  EXPECT_THAT(Bytes("bfloat16:1.0039062500000002"), ElementsAre(0x81, 0x3F));
  const ArgSpec spec = *ParseArgSpec("bfloat16[16908288]:arange");
  std::vector<uint16_t> values(16908288);
  InitializeHostBytes(spec, 0, 0, values.data());
  EXPECT_EQ(values[16908287], 0x4B81);  // 16908288, the nearest to 16908287
  EXPECT_EQ(values[16777217], 0x4B80);  // a tie: to even, 16777216
  EXPECT_EQ(values[256], 0x4380);       // 256, exact
}

TEST(Arguments, AllocatesTensorsOnTheDevice) {
  auto args =
      Arguments::Allocate({*ParseArgSpec("float32[2,3]:ones"), *ParseArgSpec("int64:7")}, 0, kCpu);
  ASSERT_THAT(args, IsOk());
  ASSERT_EQ((*args)->size(), 2);
  const DLTensor& a = (*args)->tensors()[0];
  EXPECT_EQ(a.ndim, 2);
  EXPECT_EQ(a.shape[0], 2);
  EXPECT_EQ(a.shape[1], 3);
  EXPECT_EQ(a.device.device_type, kDLCPU);
  EXPECT_EQ(a.strides, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 256, 0u);
  EXPECT_EQ(static_cast<const float*>(a.data)[5], 1.0f);
  const DLTensor& s = (*args)->tensors()[1];
  EXPECT_EQ(s.ndim, 0);
  EXPECT_EQ(*static_cast<const int64_t*>(s.data), 7);
  EXPECT_EQ((*args)->ShapeString(), "float32[2, 3], int64:7");
  EXPECT_THAT((*args)->FlushFromCaches(1), IsOk());
}

TEST(Arguments, Sha256OfEachArgument) {
  auto args = Arguments::Allocate(
      {*ParseArgSpec("float32[4]:zeros"), *ParseArgSpec("float32[4]:fill:2")}, 0, kCpu);
  ASSERT_THAT(args, IsOk());
  auto digests = (*args)->Sha256();
  ASSERT_THAT(digests, IsOk());
  EXPECT_THAT(*digests,
              ElementsAre("374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb",
                          "c3a6b1f08b0b05ac05390d6c257551ffd0cdcf40496f232b52df2498f915469e"));
}

TEST(Arguments, OverTheLimitIsResourceExhaustedBeforeAllocating) {
  ArgumentLimits limits;
  limits.max_total_bytes = 1000;
  EXPECT_THAT(Arguments::Allocate({*ParseArgSpec("float32[200]"), *ParseArgSpec("float32[100]")}, 0,
                                  kCpu, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("more than the limit of 1000 bytes per job (at 'float32[100]')")));
  // Small tensors at 2 MiB alignment take megabytes each: counted against the limit.
  limits.max_total_bytes = uint64_t{16} << 20;
  PlacementOptions wide;
  wide.alignment = kHugePageBytes;
  std::vector<ArgSpec> eight(8, *ParseArgSpec("float32[16]"));
  EXPECT_THAT(
      Arguments::Allocate(eight, 0, kCpu, limits, wide),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("room to place them need more than the limit of 16777216"),
                     HasSubstr("(512 bytes of data"), HasSubstr("a smaller tensor_alignment"))));
  EXPECT_THAT(Arguments::Allocate(eight, 0, kCpu, limits), IsOk());
  eight.resize(6);
  EXPECT_THAT(Arguments::Allocate(eight, 0, kCpu, limits, wide), IsOk());
  // Far beyond memory: refused by the limit, not by a failed allocation.
  EXPECT_THAT(Arguments::Allocate({*ParseArgSpec("float32[1099511627776]")}, 0, kCpu),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("limit")));
}

uintptr_t Address(const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data); }

TEST(Arguments, DefaultPlacementStaggersTheArgumentsAcrossAPage) {
  auto args = Arguments::Allocate({*ParseArgSpec("float32[1000]"), *ParseArgSpec("float32[1000]"),
                                   *ParseArgSpec("float32[1000]")},
                                  0, kCpu);
  ASSERT_THAT(args, IsOk());
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(Address((*args)->tensors()[k]) % 4096, static_cast<uintptr_t>(k) * 256) << k;
  }
  const std::vector<TensorPlace> places = (*args)->Placement();
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[0].offset, 0u);
  EXPECT_EQ(places[0].alignment, 4096u);
  EXPECT_EQ(places[1].offset, 256u);
  EXPECT_EQ(places[1].alignment, 256u);
  EXPECT_EQ(places[2].offset, 512u);
  EXPECT_EQ(places[2].alignment, 512u);
}

TEST(Arguments, TensorsLieAtTheRequestedAlignmentAndOffset) {
  const std::vector<ArgSpec> specs = {*ParseArgSpec("float32[3000]:random"),
                                      *ParseArgSpec("int8[5]:ones"), *ParseArgSpec("float64:2")};
  for (const uint32_t offset : {0u, 64u, 192u, 4032u}) {
    PlacementOptions placement;
    placement.offsets = {offset};
    auto args = Arguments::Allocate(specs, 7, kCpu, {}, placement);
    ASSERT_THAT(args, IsOk());
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(Address((*args)->tensors()[k]) % 4096, offset) << "argument " << k;
    }
    // The data is what the spec says, wherever it lies.
    EXPECT_EQ(
        std::memcmp((*args)->tensors()[0].data, Bytes("float32[3000]:random", 7, 0).data(), 12000),
        0);
    EXPECT_EQ(static_cast<const int8_t*>((*args)->tensors()[1].data)[4], 1);
  }
  PlacementOptions per_argument;
  per_argument.offsets = {128, 0, 3968};
  auto args = Arguments::Allocate(specs, 0, kCpu, {}, per_argument);
  ASSERT_THAT(args, IsOk());
  EXPECT_EQ(Address((*args)->tensors()[0]) % 4096, 128u);
  EXPECT_EQ(Address((*args)->tensors()[1]) % 4096, 0u);
  EXPECT_EQ(Address((*args)->tensors()[2]) % 4096, 3968u);

  PlacementOptions huge;
  huge.alignment = 2 << 20;
  huge.huge_pages = true;
  args = Arguments::Allocate(specs, 0, kCpu, {}, huge);
  ASSERT_THAT(args, IsOk());
  EXPECT_TRUE((*args)->huge_pages());
  for (int k = 0; k < 3; ++k) EXPECT_EQ(Address((*args)->tensors()[k]) % (2 << 20), 0u) << k;
  EXPECT_EQ((*args)->Placement()[0].alignment, 2u << 20);
}

TEST(Arguments, MoveToKeepsTheContentsAndChecksums) {
  auto args = Arguments::Allocate(
      {*ParseArgSpec("float32[5000]:random"), *ParseArgSpec("int32[7]:arange")}, 3, kCpu);
  ASSERT_THAT(args, IsOk());
  const auto before = (*args)->Sha256();
  ASSERT_THAT(before, IsOk());
  // Forward and back by less than the size (overlapping), then far.
  for (const uint64_t offset : {64u, 4032u, 0u, 1024u, 1088u}) {
    ASSERT_THAT((*args)->MoveTo(0, offset), IsOk());
    ASSERT_THAT((*args)->MoveTo(1, 4032 - offset), IsOk());
    EXPECT_EQ(Address((*args)->tensors()[0]) % 4096, offset);
    EXPECT_EQ(Address((*args)->tensors()[1]) % 4096, 4032 - offset);
    EXPECT_EQ((*args)->Sha256().value(), *before) << "at " << offset;
  }
}

TEST(Arguments, PlacementsOutOfRangeAreInvalidArgumentNamingTheOption) {
  const std::vector<ArgSpec> specs = {*ParseArgSpec("float32[4]"), *ParseArgSpec("float32[4]")};
  struct Case {
    PlacementOptions placement;
    const char* message;
  };
  const auto with = [](auto set) {
    PlacementOptions p;
    set(p);
    return p;
  };
  const Case cases[] = {
      {with([](PlacementOptions& p) { p.alignment = 32; }), "tensor_alignment = 32"},
      {with([](PlacementOptions& p) { p.alignment = 96; }), "a power of two from 64"},
      {with([](PlacementOptions& p) { p.alignment = 4 << 20; }), "tensor_alignment = 4194304"},
      {with([](PlacementOptions& p) { p.offsets = {100}; }),
       "tensor_offset = 100 is out of range (accepted: a multiple of 64 under 4096"},
      {with([](PlacementOptions& p) { p.offsets = {4096}; }), "tensor_offset = 4096"},
      {with([](PlacementOptions& p) {
         p.alignment = 256;
         p.offsets = {64};
       }),
       "a multiple of 256"},
      {with([](PlacementOptions& p) {
         p.alignment = 8192;
         p.offsets = {64};
       }),
       "accepted: 0 with tensor_alignment = 8192"},
      {with([](PlacementOptions& p) {
         p.offsets = {0, 64, 128};
       }),
       "tensor_offset has 3 values for 2 arguments"},
      {with([](PlacementOptions& p) { p.repeats_per_layout = 2; }),
       "repeats_per_layout applies only with randomize_layout"},
      {with([](PlacementOptions& p) {
         p.randomize = true;
         p.repeats_per_layout = 0;
       }),
       "repeats_per_layout = 0"},
      {with([](PlacementOptions& p) {
         p.randomize = true;
         p.offsets = {0};
       }),
       "give it or tensor_offset, not both"},
      {with([](PlacementOptions& p) {
         p.randomize = true;
         p.alignment = 4096;
       }),
       "randomize_layout moves tensors within a page"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Arguments::Allocate(specs, 0, kCpu, {}, c.placement),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
  }
}

TEST(TensorPlacement, DefaultOffsetsRespectTheAlignment) {
  PlacementOptions p;
  EXPECT_EQ(OffsetOf(p, 0), 0u);
  EXPECT_EQ(OffsetOf(p, 3), 768u);
  EXPECT_EQ(OffsetOf(p, 16), 0u);  // wraps at a page
  p.alignment = 1024;
  EXPECT_EQ(OffsetOf(p, 1), 1024u);
  EXPECT_EQ(OffsetOf(p, 5), 1024u);
  p.alignment = 4096;
  EXPECT_EQ(OffsetOf(p, 3), 0u);
  EXPECT_EQ(RandomOffsetStep(PlacementOptions{}), 64u);
  p.alignment = 512;
  EXPECT_EQ(RandomOffsetStep(p), 512u);
}

TEST(TensorPlacement, PlaceOfAnAddress) {
  const auto at = [](uintptr_t a) { return reinterpret_cast<const void*>(a); };
  EXPECT_EQ(PlaceOf(at(0x10000 + 192), 64).offset, 192u);
  EXPECT_EQ(PlaceOf(at(0x10000 + 192), 64).alignment, 64u);
  EXPECT_EQ(PlaceOf(at(0x10000), 64).alignment, 4096u);           // capped at a page
  EXPECT_EQ(PlaceOf(at(0x400000), 2 << 20).alignment, 2u << 20);  // or the alignment asked
}

TEST(TensorPlacement, HugePagesAvailabilityFromSysfs) {
  const std::string root = ::testing::TempDir() + "/thp_root";
  const std::string dir = root + "/sys/kernel/mm/transparent_hugepage";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const auto write = [&](const std::string& text) {
    FILE* f = std::fopen((dir + "/enabled").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write("always [madvise] never\n");
  EXPECT_EQ(HugePagesUnavailable(root), "");
  write("[always] madvise never\n");
  EXPECT_EQ(HugePagesUnavailable(root), "");
  write("always madvise [never]\n");
  EXPECT_THAT(HugePagesUnavailable(root), HasSubstr("off on this host (never)"));
  EXPECT_THAT(HugePagesUnavailable(root + "/nowhere"), HasSubstr("no transparent huge pages"));
}

TEST(Arguments, DeviceWithoutApiIsFailedPrecondition) {
  EXPECT_THAT(Arguments::Allocate({*ParseArgSpec("float32[4]")}, 0, {base::DeviceType::kCuda, 0}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace kprof::core
