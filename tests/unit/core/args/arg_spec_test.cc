#include "core/args/arg_spec.h"

#include <random>
#include <string>

#include "core/args/data_type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseArgSpec, TensorsWithEachInitialiser) {
  auto spec = ParseArgSpec("float32[1024, 1024]:random");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(DataTypeName(spec->dtype), "float32");
  EXPECT_THAT(spec->shape, ElementsAre(1024, 1024));
  EXPECT_EQ(spec->init, ArgInit::kRandom);
  EXPECT_EQ(spec->num_elements, 1024 * 1024);
  EXPECT_EQ(spec->num_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(spec->text, "float32[1024, 1024]:random");

  EXPECT_EQ(ParseArgSpec("int32[16]:zeros")->init, ArgInit::kZeros);
  EXPECT_EQ(ParseArgSpec("float64[8]:ones")->init, ArgInit::kOnes);
  EXPECT_EQ(ParseArgSpec("int64[4]:arange")->init, ArgInit::kArange);
  auto fill = ParseArgSpec("float32[4]:fill:0.5");
  ASSERT_THAT(fill, IsOk());
  EXPECT_EQ(fill->init, ArgInit::kFill);
  EXPECT_EQ(fill->fill.real, 0.5);
  EXPECT_EQ(ParseArgSpec("int8[2,3,4]")->init, ArgInit::kZeros);  // no initialiser: zeros
}

TEST(ParseArgSpec, ScalarsAreZeroDimensional) {
  auto f = ParseArgSpec("float32:2.5");
  ASSERT_THAT(f, IsOk());
  EXPECT_TRUE(f->shape.empty());
  EXPECT_EQ(f->num_elements, 1);
  EXPECT_EQ(f->init, ArgInit::kFill);
  EXPECT_EQ(f->fill.real, 2.5);
  auto i = ParseArgSpec("int64:-7");
  ASSERT_THAT(i, IsOk());
  EXPECT_EQ(i->fill.integer, -7);
  EXPECT_EQ(ParseArgSpec("uint64:18446744073709551615")->fill.unsigned_integer, UINT64_MAX);
  EXPECT_EQ(ParseArgSpec("bool:true")->fill.integer, 1);
  EXPECT_TRUE(ParseArgSpec("float64[]:ones")->shape.empty());
  EXPECT_EQ(ParseArgSpec("float16")->num_bytes, 2u);
  EXPECT_EQ(ParseArgSpec("float32:-inf")->fill.real, -INFINITY);
  // At the edge of a type's range: values that round to its largest finite one, and infinity
  // when asked for by name.
  EXPECT_THAT(ParseArgSpec("float16:65519"), IsOk());
  EXPECT_THAT(ParseArgSpec("float16:-inf"), IsOk());
  EXPECT_THAT(ParseArgSpec("float16[65505]:arange"), IsOk());
  EXPECT_THAT(ParseArgSpec("float32:3.4028234e38"), IsOk());
}

TEST(ParseArgSpec, EveryDataType) {
  for (const char* type : {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                           "uint64", "float16", "bfloat16", "float32", "float64"}) {
    auto spec = ParseArgSpec(std::string(type) + "[3]:ones");
    ASSERT_THAT(spec, IsOk()) << type;
    EXPECT_EQ(DataTypeName(spec->dtype), type);
  }
  EXPECT_EQ(ParseArgSpec("bool[3]")->num_bytes, 3u);
  EXPECT_EQ(ParseArgSpec("bfloat16[3]")->num_bytes, 6u);
  EXPECT_EQ(ParseArgSpec("int8[0]")->num_bytes, 0u);  // empty tensors are allowed
}

TEST(ParseArgSpec, ShapeStringMatchesTheReport) {
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("float32[2,3]:ones"))), "float32[2, 3]");
  // A scalar's value is shown, as written, where the spec gives it; a random one's is not.
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("int64:7"))), "int64:7");
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("float32[]:fill:2.5"))), "float32:2.5");
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("float64:1e-3"))), "float64:1e-3");
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("int32"))), "int32:0");
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("float32:ones"))), "float32:1");
  EXPECT_EQ(report::ShapeString(ShapeOf(*ParseArgSpec("float32:random"))), "float32[]");
}

struct BadSpec {
  const char* spec;
  const char* message;
};

TEST(ParseArgSpec, MalformedSpecsQuoteTheSpecAndTheColumn) {
  const BadSpec cases[] = {
      {"", "argument spec '': column 1: expected a data type"},
      {"[4]:zeros", "column 1: expected a data type"},
      {"float[4]", "column 1: unknown data type 'float' (accepted: bool, int8"},
      {"float32[4,x]", "argument spec 'float32[4,x]': column 11: expected a dimension"},
      {"float32[-4]", "column 9: expected a dimension (a non-negative integer)"},
      {"float32[4", "column 10: expected ',' or ']' after a dimension"},
      {"float32[4]x", "column 11: expected ':' and an initialiser"},
      {"float32[4]:randomly", "column 12: expected an initialiser: zeros, ones, random"},
      {"float32[4]:fill:", "column 17: expected a value after 'fill:'"},
      {"float32[4]:fill:abc", "'abc' is not a number"},
      {"float32:2.5x", "'2.5x' is not a number"},
      {"float64:1e999", "beyond the range of float64"},
      {"float32:1e40",
       "column 9: '1e40' is beyond the range of float32 (accepted: -3.40282e+38 to 3.40282e+38, "
       "or inf and -inf)"},
      {"float16:70000", "'70000' is beyond the range of float16 (accepted: -65504 to 65504"},
      {"float16[2]:fill:-65520", "'-65520' is beyond the range of float16"},
      {"bfloat16:-1e39", "'-1e39' is beyond the range of bfloat16 (accepted: -3.38953e+38"},
      {"float16[70000]:arange",
       "column 8: arange reaches 69999, beyond the range of float16 (accepted: values up to "
       "65504)"},
      {"int8:300", "column 6: '300' does not fit int8 (accepted: -128 to 127)"},
      {"uint8[2]:fill:-1", "'-1' is not a non-negative integer"},
      {"uint16:65536", "does not fit uint16 (accepted: 0 to 65535)"},
      {"int64:9223372036854775808", "does not fit int64"},
      {"int32:1.5", "'1.5' is not an integer"},
      {"bool:2", "'2' is not a bool (accepted: true, false, 1, 0)"},
      {"float32[99999999999999999999]", "dimension too large"},
      {"float32[4294967296,4294967296]", "the element count overflows 64 bits"},
      {"float64[1152921504606846976]", "the size in bytes overflows 64 bits"},
  };
  for (const BadSpec& c : cases) {
    EXPECT_THAT(ParseArgSpec(c.spec),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.spec;
  }
  std::string deep = "int8[";
  for (int i = 0; i < 33; ++i) deep += i ? ",1" : "1";
  EXPECT_THAT(ParseArgSpec(deep + "]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than 32 dimensions")));
}

// Random and mutated strings: every one parses or is INVALID_ARGUMENT, never a crash or hang.
TEST(ParseArgSpec, RandomAndMutatedStringsNeverCrash) {
  const std::string seeds[] = {"float32[1024, 1024]:random", "int8:7",
                               "float32[4]:fill:0.5",        "uint64[3,0,2]:arange",
                               "bool[8]:fill:true",          "bfloat16:ones"};
  const std::string alphabet = "0123456789[],: -+.eEfilnrtuxabc\x00\xff";
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string text = seeds[rng() % std::size(seeds)];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text.insert(text.begin() + static_cast<long>(at), c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
          break;
      }
    }
    if (i % 10 == 0) {  // pure noise, too
      text.resize(rng() % 40);
      for (char& ch : text) ch = static_cast<char>(rng());
    }
    auto spec = ParseArgSpec(text);
    if (!spec.ok()) {
      ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    } else {
      ASSERT_GE(spec->num_elements, 0) << text;
    }
  }
}

}  // namespace
}  // namespace kprof::core
