#include "util/heap_meter.hpp"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::size_t> in_use{0}, peak{0};

void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const std::size_t now = in_use += malloc_usable_size(p);
  for (std::size_t seen = peak; now > seen && !peak.compare_exchange_weak(seen, now);) {
  }
  return p;
}

void uncounted(void* p) noexcept {
  if (!p) return;
  in_use -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

// The replaceable global allocation functions ([new.delete]); the array forms call these.
void* operator new(std::size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new(std::size_t n, std::align_val_t alignment) {
  void* p = nullptr;
  const std::size_t a = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  return counted(posix_memalign(&p, a, n ? n : 1) == 0 ? p : nullptr);
}
// The nothrow forms too (std::stable_sort's temporary buffer uses one): a sanitizer replaces every
// form we leave out, and its operator new's block freed by our delete is a mismatch it reports.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n ? n : 1);
  return p ? counted(p) : nullptr;
}
void* operator new(std::size_t n, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  void* p = nullptr;
  const std::size_t a = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  return posix_memalign(&p, a, n ? n : 1) == 0 ? counted(p) : nullptr;
}
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

namespace workbench {

std::size_t peak_extra_heap_bytes(const std::function<void()>& call) {
  const std::size_t before = in_use;
  peak = before;
  call();
  return peak - before;
}

}  // namespace workbench
