// A slip of the keyboard, named: the known word nearest one that is not known.
//
//   Nearest("repeats", {"repeat", "number", "device"})  // "repeat"
//   Nearest("zzz", {"repeat"})                          // "": nothing near enough
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kprof::base {

// Edits (insertions, deletions, substitutions, swaps of neighbours) from `a` to `b`, '_' and
// '-' counted as the same.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate fewest edits from `word`, when that is a slip rather than another word: at most
// 2 edits and under a third of its length (1 edit for words of up to 5 letters). "" when none is
// that near; the first of the nearest on a tie.
std::string Nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace kprof::base
