/* Linked into the C peer (mpi_coll.c) by bench/compare.py with -Wl,--wrap=malloc, so
 * its buffers are what railyard perf's are (runtime memory.rs, HugePageBuffer): from
 * 4 MiB up, a start on a 2 MiB boundary and MADV_HUGEPAGE before the first touch, so
 * both sides' buffers are transparent huge pages from their first byte (where the
 * system's THP mode is `madvise`). Smaller requests go to malloc unchanged; free()
 * takes either. Only the peer's own calls are wrapped, not those inside MPI or libc. */
#include <stdlib.h>
#include <sys/mman.h>

void *__real_malloc(size_t n);

void *__wrap_malloc(size_t n) {
    const size_t huge = (size_t)2 << 20;
    if (n < ((size_t)4 << 20)) return __real_malloc(n);
    size_t span = (n + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, span) != 0) return NULL;
    madvise(p, span, MADV_HUGEPAGE); /* advice: ignored where unsupported */
    return p;
}
