// Comparing two sets of repeats (seconds per call, base and new): whether new is faster, slower
// or the same within the noise, and by how much, as pure functions.
//
// The change is new's median over base's, less 1 (-0.03: 3% faster). Its interval comes from a
// percentile bootstrap of that ratio; its significance from a two-sided Mann–Whitney U test, as
// scipy.stats.mannwhitneyu computes it (exact for small samples without ties, else the normal
// approximation with tie and continuity corrections; unlike scipy, the approximation too past
// 2^100 orderings, where exact counts would overflow). A verdict needs all three: the test
// rejects "the same distribution", the interval excludes no change, and the change is beyond
// the threshold. Requiring both of the first keeps "same" for equal distributions at or above
// the confidence asked.
//
// The bootstrap draws from SplitMix64 with a fixed seed, restarted for each comparison, so a
// comparison's numbers depend on its two samples alone and every client (the CLI, the Python
// client) computes the same ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kprof::report {

// Sebastiano Vigna's SplitMix64: small, fast, and the same in every language.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n), by the high half of a 128-bit product (Lemire's reduction); 0 for n = 0.
  size_t Below(size_t n);

 private:
  uint64_t state_;
};

struct MannWhitney {
  double u = 0;  // the U statistic of the first sample
  double p = 1;  // two-sided p-value
  bool exact = false;
};

// Whether C(m + n, m), the number of orderings of samples of m and n without ties, stays below
// 2^100, so that UCounts counts them in 128-bit integers without overflow.
bool CountsFit(size_t m, size_t n);

// How many orderings of samples of m and n without ties give each U, from 0 to m n.
std::vector<__int128> UCounts(size_t m, size_t n);

// The two-sided test of `x` against `y`. p = 1 when either is empty.
MannWhitney MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);

struct Interval {
  double low = std::numeric_limits<double>::quiet_NaN();
  double high = std::numeric_limits<double>::quiet_NaN();
};

// The central `confidence` interval of median(fresh) / median(base) - 1 over `resamples`
// bootstrap resamples of each side.
Interval BootstrapChangeInterval(const std::vector<double>& base, const std::vector<double>& fresh,
                                 double confidence, int resamples);

// kNoisy is never CompareRepeats' answer: it is a client's, for repeats it will not judge (taken
// on a busy host, or that did not converge).
enum class Verdict { kFaster, kSlower, kSame, kInsufficient, kNoisy };

// "faster", "slower", "same", "insufficient", "noisy".
const char* VerdictName(Verdict verdict);

struct CompareOptions {
  double confidence = 0.95;  // in (0, 1)
  size_t min_repeats = 5;    // fewer on either side: insufficient
  int resamples = 2000;      // bootstrap resamples
  // Changes within this fraction are the same, however sure: runs of one kernel on one host
  // seldom reproduce closer than 1% (clocks, placement), while a steady spin's 0.04% is
  // "significant" between two runs.
  double threshold = 0.01;
};

struct Comparison {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  size_t base_repeats = 0, new_repeats = 0;
  double base_median = kUnset, new_median = kUnset;
  double change = kUnset;  // new_median / base_median - 1
  Interval interval;       // of the change
  double p = kUnset;       // Mann–Whitney U, two-sided
  Verdict verdict = Verdict::kInsufficient;
};

// The bootstrap's fixed seed ("kprof" in ASCII).
inline constexpr uint64_t kCompareSeed = 0x6b70726f66;

// Base against new. With too few repeats on either side (or a median that is not positive) the
// verdict is insufficient, and the interval and p are left unset (NaN): too few to say.
Comparison CompareRepeats(const std::vector<double>& base, const std::vector<double>& fresh,
                          const CompareOptions& options = {});

}  // namespace kprof::report
