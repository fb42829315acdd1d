//===- BufferCache.c - the generated code's heap allocations --------------===//
//
// Part of xfmr. See BufferCache.h.
//
//===----------------------------------------------------------------------===//

#include "BufferCache.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define XFMR_HIDDEN __attribute__((visibility("hidden")))

enum { kSlots = 64 };
static const size_t kDefaultLimit = (size_t)1 << 30;

/// A held block: its malloc_usable_size and when it was freed.
typedef struct {
  void *ptr;
  size_t bytes;
  uint64_t freedAt;
} Slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static Slot slots[kSlots];
static int used;
static size_t held, limit;
static uint64_t tick;

/// Defined only in processes built with AddressSanitizer.
extern void __asan_init(void) __attribute__((weak));

static void readLimit(void) {
  limit = kDefaultLimit;
  const char *env = getenv("XFMR_BUFFER_CACHE_BYTES");
  if (env && *env) {
    char *end;
    unsigned long long v = strtoull(env, &end, 10);
    if (!*end)
      limit = (size_t)v;
  }
  if (__asan_init)
    limit = 0;
}

/// Removes slot `i` (under the lock); returns its block.
static void *take(int i) {
  void *p = slots[i].ptr;
  held -= slots[i].bytes;
  slots[i] = slots[--used];
  return p;
}

XFMR_HIDDEN void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  if (bytes < XFMR_UK_CACHED_MIN_BYTES)
    return malloc(bytes);
  pthread_once(&once, readLimit);
  void *p = 0;
  pthread_mutex_lock(&lock);
  // The smallest held block that fits without wasting more than a quarter.
  int best = -1;
  for (int i = 0; i < used; ++i)
    if (slots[i].bytes >= bytes && slots[i].bytes - bytes <= bytes / 4 &&
        (best < 0 || slots[i].bytes < slots[best].bytes))
      best = i;
  if (best >= 0)
    p = take(best);
  pthread_mutex_unlock(&lock);
  return p ? p : malloc(bytes);
}

XFMR_HIDDEN void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // Not cached (finalize-memref-to-llvm over-allocates and aligns itself
  // unless use-aligned-alloc is set, which the pipeline does not set).
  return aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
}

XFMR_HIDDEN void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  size_t bytes = malloc_usable_size(p);
  if (bytes < XFMR_UK_CACHED_MIN_BYTES) {
    free(p);
    return;
  }
  pthread_once(&once, readLimit);
  void *evicted[kSlots + 1];
  int evict = 0;
  pthread_mutex_lock(&lock);
  if (bytes > limit) {
    evicted[evict++] = p;
  } else {
    // Make room: the least recently freed blocks go.
    while (used && (used == kSlots || held + bytes > limit)) {
      int oldest = 0;
      for (int i = 1; i < used; ++i)
        if (slots[i].freedAt < slots[oldest].freedAt)
          oldest = i;
      evicted[evict++] = take(oldest);
    }
    slots[used++] = (Slot){p, bytes, ++tick};
    held += bytes;
  }
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < evict; ++i) // outside the lock: munmap is slow
    free(evicted[i]);
}

XFMR_HIDDEN void xfmr_uk_buffer_cache_release(void) {
  pthread_mutex_lock(&lock);
  while (used)
    free(take(used - 1));
  pthread_mutex_unlock(&lock);
}

XFMR_HIDDEN void xfmr_uk_buffer_cache_set_limit(size_t bytes) {
  pthread_once(&once, readLimit); // so that it cannot overwrite `bytes` later
  pthread_mutex_lock(&lock);
  limit = bytes;
  pthread_mutex_unlock(&lock);
  xfmr_uk_buffer_cache_release(); // nothing held over the new limit
}

XFMR_HIDDEN size_t xfmr_uk_buffer_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  size_t b = held;
  pthread_mutex_unlock(&lock);
  return b;
}

XFMR_HIDDEN int xfmr_uk_buffer_cache_blocks(void) {
  pthread_mutex_lock(&lock);
  int n = used;
  pthread_mutex_unlock(&lock);
  return n;
}

/// The artifact is unloaded (dlclose) or the process exits: give the
/// blocks back.
__attribute__((destructor)) static void releaseAtUnload(void) { xfmr_uk_buffer_cache_release(); }
