// Sizes in bytes as people write them — "268435456", "256 MiB", "4G", "1.5 GiB", "64kB" — and
// as kprofd and kprof print them ("256 MiB"). One reading for every option and file that takes
// a size, one way of printing for every message and table that shows one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kprof::base {

// What a size may be written as, for messages: "a size in bytes: 268435456, 256 MiB, 4G".
inline constexpr char kByteSizeForms[] =
    "a size in bytes: 268435456, 256 MiB, 4G, 1.5 GiB (K, M, G, T and KiB, MiB, GiB, TiB are "
    "powers of 1024; kB, MB, GB, TB powers of 1000)";

// The size `text` writes: a whole or decimal number, optionally a space, optionally a unit (B;
// K, M, G, T or KiB, MiB, GiB, TiB: 1024-based; kB, MB, GB, TB: 1000-based; case aside). A
// fraction of a byte is dropped. nullopt for anything else, a negative number or past 2^64-1.
std::optional<uint64_t> ParseByteSize(std::string_view text);

// `bytes` in the largest binary unit it reaches: "0 B", "512 B", "256 MiB", "4 GiB"; a size that
// is not a whole number of that unit has three significant digits ("17.2 KiB", "1.50 GiB").
std::string FormatByteSize(uint64_t bytes);

}  // namespace kprof::base
