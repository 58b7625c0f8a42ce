"""The statistics `kprof compare` and `kprof rank` rest on, as the CLI computes them
(report/statistics.cc, report/compare.cc): numpy's linear percentile, a two-sided Mann-Whitney U
test as scipy computes it (exact for small samples without ties, else the normal approximation
with tie and continuity corrections), and a percentile bootstrap interval of the change of
medians drawn from SplitMix64 with the CLI's fixed seed, so both clients give the same numbers.
"""

import math

_MASK = (1 << 64) - 1
_SEED = 0x6B70726F66  # "kprof"
_NAN = float("nan")


class _SplitMix64:
    def __init__(self, seed):
        self.state = seed & _MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def percentile(samples, p):
    """numpy's linear percentile, with the C++ client's arithmetic."""
    samples = sorted(samples)
    rank = p / 100 * (len(samples) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(samples) - 1)
    fraction = rank - below
    if fraction == 0:
        return samples[below]
    return samples[below] + (samples[above] - samples[below]) * fraction


def median(samples):
    return percentile(samples, 50)


# Tukey's "far out" k: pictures draw the repeats within these fences on their axis and count the
# rest apart (report::kFarOut).
FAR_OUT = 3.0


def tukey_outliers(samples, k=1.5):
    """Indices of the samples outside [Q1 - k*IQR, Q3 + k*IQR], as report::TukeyOutliers tells
    them: none for fewer than 4 samples or when Q1 = Q3."""
    if len(samples) < 4:
        return []
    q1, q3 = percentile(samples, 25), percentile(samples, 75)
    if not q3 > q1:
        return []
    low, high = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
    return [i for i, s in enumerate(samples) if s < low or s > high]


def within_far_out(samples):
    """The samples within Tukey's far-out fences, in their order."""
    far = set(tukey_outliers(samples, FAR_OUT))
    return [s for i, s in enumerate(samples) if i not in far]


def _ranks(pooled):
    order = sorted(range(len(pooled)), key=lambda k: pooled[k])
    ranks, tie_term, i = [0.0] * len(pooled), 0.0, 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and pooled[order[j + 1]] == pooled[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = rank
        t = float(j - i + 1)
        tie_term += t * t * t - t
        i = j + 1
    return ranks, tie_term


def u_counts(m, n):
    """How many orderings of samples of m and n without ties give each U (0 to m n): the
    Gaussian binomial's coefficients, counted exactly."""
    if m > n:
        m, n = n, m
    f = [0] * (m * n + m + 1)
    f[0], degree = 1, 0
    for k in range(1, m + 1):
        shift = n + k
        for d in range(degree + shift, shift - 1, -1):
            f[d] -= f[d - shift]
        degree += shift
        for d in range(k, degree + 1):
            f[d] += f[d - k]
        degree -= k
    return f[:degree + 1]


def _exact_upper_tail(m, n, u):
    """P(U >= u) without ties."""
    f = u_counts(m, n)
    total = sum(f)
    upper = sum(c for d, c in enumerate(f) if d >= u)
    return float(upper) / float(total)


def mann_whitney_u(x, y):
    """(U of x, two-sided p, exact?) as scipy.stats.mannwhitneyu(x, y) gives them."""
    if not x or not y:
        return 0.0, 1.0, False
    ranks, tie_term = _ranks(list(x) + list(y))
    n1, n2 = float(len(x)), float(len(y))
    u1 = sum(ranks[:len(x)]) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    # Exact while the orderings can be counted in the CLI's 128-bit integers (below 2^100).
    exact = (len(x) <= 8 or len(y) <= 8) and tie_term == 0 and \
        math.comb(len(x) + len(y), min(len(x), len(y))) < 2 ** 100
    if exact:
        p = 2 * _exact_upper_tail(len(x), len(y), u)
    else:
        n = n1 + n2
        v = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
        s = math.sqrt(v) if v >= 0 else _NAN  # below 0 by rounding alone: NaN, as in C++
        try:
            z = (u - n1 * n2 / 2 - 0.5) / s
        except ZeroDivisionError:
            z = -math.inf
        p = math.erfc(z / math.sqrt(2.0))
    return u1, min(max(1.0 if math.isnan(p) else p, 0.0), 1.0), exact


def _resampled_median(ordered, random):
    n = len(ordered)
    counts = [0] * n
    for _ in range(n):
        counts[random.below(n)] += 1
    low_rank, high_rank = (n - 1) // 2, n // 2
    low = high = 0.0
    seen, have_low = 0, False
    for k in range(n):
        seen += counts[k]
        if not have_low and seen > low_rank:
            low, have_low = ordered[k], True
        if seen > high_rank:
            high = ordered[k]
            break
    return (low + high) / 2


def bootstrap_change_interval(base, new, confidence=0.95, resamples=2000):
    """The central interval of median(new) / median(base) - 1, as the CLI draws it."""
    if not base or not new or resamples < 1:
        return _NAN, _NAN
    random = _SplitMix64(_SEED)
    a, b = sorted(base), sorted(new)
    changes = []
    for _ in range(resamples):
        base_median = _resampled_median(a, random)
        new_median = _resampled_median(b, random)
        if base_median > 0:  # one of 0 (repeats that read no time) has no ratio
            changes.append(new_median / base_median - 1)
    if not changes:
        return _NAN, _NAN
    tail = (1 - confidence) / 2 * 100
    return percentile(changes, tail), percentile(changes, 100 - tail)
