// FreshPages: anonymous memory never touched yet, so that touching it costs exactly one page
// fault per page (huge pages off) — what the page-fault counters are tested with.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>

namespace kprof::testing {

class FreshPages {
 public:
  explicit FreshPages(size_t pages)
      : pages_(pages), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    region_ =
        mmap(nullptr, pages_ * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region_ != MAP_FAILED) madvise(region_, pages_ * page_, MADV_NOHUGEPAGE);
  }
  ~FreshPages() {
    if (region_ != MAP_FAILED) munmap(region_, pages_ * page_);
  }
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;

  bool ok() const { return region_ != MAP_FAILED; }

  // Writes one byte into each page: one fault each, the first time.
  void Touch() {
    auto* bytes = static_cast<volatile char*>(region_);
    for (size_t i = 0; i < pages_; ++i) bytes[i * page_] = 1;
  }

 private:
  size_t pages_;
  size_t page_;
  void* region_;
};

}  // namespace kprof::testing
