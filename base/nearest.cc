#include "base/nearest.h"

#include <algorithm>

namespace kprof::base {

size_t EditDistance(std::string_view a, std::string_view b) {
  const auto same = [](char x, char y) {
    return x == y || ((x == '_' || x == '-') && (y == '_' || y == '-'));
  };
  // Rows of the Damerau-Levenshtein (optimal string alignment) table.
  std::vector<size_t> before(b.size() + 1), last(b.size() + 1), now(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) last[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    now[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      now[j] =
          std::min({last[j] + 1, now[j - 1] + 1, last[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        now[j] = std::min(now[j], before[j - 2] + 1);
      }
    }
    before.swap(last);
    last.swap(now);
  }
  return last[b.size()];
}

std::string Nearest(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t allowed = word.size() <= 5 ? 1 : std::min<size_t>(2, (word.size() - 1) / 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const size_t d = EditDistance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace kprof::base
