// What the isolation tests (isolation_*test.cc) share: the tokens of the attacking client and
// its victim, and the slack on the victim's measured time.
#pragma once

namespace kprof::testing {

inline constexpr char kAttackerToken[] = "token-of-the-attacking-client";
inline constexpr char kVictimToken[] = "token-of-the-victim-client";

// A sleep to a deadline ends a wake-up late: by half a millisecond now and then on a loaded
// two-core host; under ThreadSanitizer, whose interceptors sit on the way, later still. The
// victim's kernel takes 4 ms, its neighbours among the candidates 2 and 6 ms: a slack of 20%
// still tells it from either, and a forged time (a nanosecond) from all.
#if defined(__SANITIZE_THREAD__)
inline constexpr double kSlack = 1.5;
#else
inline constexpr double kSlack = 1.20;
#endif

}  // namespace kprof::testing
