//===- BufferCache.h - the generated code's heap allocations -----*- C -*-===//
//
// Part of xfmr.
//
// The CPU pipeline lowers memref.alloc / memref.dealloc to
// _mlir_memref_to_llvm_alloc / _mlir_memref_to_llvm_free
// (finalize-memref-to-llvm{use-generic-functions=true}), defined here and
// linked into every artifact: malloc and free, except that blocks of at
// least XFMR_UK_CACHED_MIN_BYTES are kept when freed and handed out again
// for the next request of about the same size (up to a quarter larger).
// A step function allocates the same buffers on every call; glibc maps
// blocks above its mmap threshold (at most 32 MiB) fresh on every malloc,
// so without the cache a prefill of 2048 tokens faulted in and zeroed
// hundreds of MB of pages per step (~10% of its time in the kernel).
//
// Every block is a malloc block: the runtime frees returned outputs with
// free() and sizes them with malloc_usable_size (the artifact ABI).
// The cache holds at most XFMR_BUFFER_CACHE_BYTES bytes (environment, read
// once; default 1 GiB, 0 disables it), least recently freed blocks go
// first; it is off in processes running AddressSanitizer (so that every
// buffer is tracked) and emptied when the artifact is unloaded.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_UKERNELS_BUFFERCACHE_H
#define XFMR_UKERNELS_BUFFERCACHE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { XFMR_UK_CACHED_MIN_BYTES = 256 << 10 };

void *_mlir_memref_to_llvm_alloc(size_t bytes);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes);
void _mlir_memref_to_llvm_free(void *p);

/// Sets the cache's limit in bytes (0: no caching; blocks over it are
/// freed); overrides the environment and the sanitizer check (tests).
void xfmr_uk_buffer_cache_set_limit(size_t bytes);
/// Bytes and blocks held now.
size_t xfmr_uk_buffer_cache_bytes(void);
int xfmr_uk_buffer_cache_blocks(void);
/// Frees every held block.
void xfmr_uk_buffer_cache_release(void);

#ifdef __cplusplus
}
#endif

#endif // XFMR_UKERNELS_BUFFERCACHE_H
