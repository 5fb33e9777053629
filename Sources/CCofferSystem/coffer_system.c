#include "coffer_system.h"

#include <errno.h>
#include <string.h>

#ifdef __linux__
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>

int coffer_set_not_dumpable(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int coffer_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int coffer_tune_allocator(int trim_threshold, int mmap_threshold) {
    return mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1;
}

int coffer_random_bytes(void *buffer, size_t count) {
    unsigned char *cursor = buffer;
    while (count > 0) {
        ssize_t got = getrandom(cursor, count, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        cursor += got;
        count -= (size_t)got;
    }
    return 0;
}

// The public-random pool: one page, wiped to zero in a forked child (MADV_WIPEONFORK), so that the child's lock
// reads unlocked and its `remaining` reads 0, and it refills from the kernel instead of reusing its parent's bytes.
struct coffer_random_pool {
    atomic_flag lock;
    size_t remaining;
    unsigned char bytes[4032];
};

static struct coffer_random_pool *coffer_pool;
static int coffer_pool_usable;
static pthread_once_t coffer_pool_once = PTHREAD_ONCE_INIT;

static void coffer_pool_create(void) {
    void *page = mmap(NULL, sizeof(struct coffer_random_pool), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (page == MAP_FAILED) return;
#ifdef MADV_WIPEONFORK
    if (madvise(page, sizeof(struct coffer_random_pool), MADV_WIPEONFORK) == 0) {
        coffer_pool = page;
        coffer_pool_usable = 1;
        return;
    }
#endif
    munmap(page, sizeof(struct coffer_random_pool));
}

int coffer_random_public_bytes(void *buffer, size_t count) {
    if (count > 64) {
        errno = EINVAL;
        return -1;
    }
    pthread_once(&coffer_pool_once, coffer_pool_create);
    if (!coffer_pool_usable) return coffer_random_bytes(buffer, count);
    struct coffer_random_pool *pool = coffer_pool;
    while (atomic_flag_test_and_set_explicit(&pool->lock, memory_order_acquire)) sched_yield();
    if (pool->remaining < count) {
        if (coffer_random_bytes(pool->bytes, sizeof(pool->bytes)) != 0) {
            int saved = errno;
            atomic_flag_clear_explicit(&pool->lock, memory_order_release);
            errno = saved;
            return -1;
        }
        pool->remaining = sizeof(pool->bytes);
    }
    unsigned char *source = pool->bytes + sizeof(pool->bytes) - pool->remaining;
    memcpy(buffer, source, count);
    memset(source, 0, count);
    pool->remaining -= count;
    atomic_flag_clear_explicit(&pool->lock, memory_order_release);
    return 0;
}
#else
int coffer_set_not_dumpable(void) { return -1; }
int coffer_is_dumpable(void) { return -1; }
int coffer_tune_allocator(int trim_threshold, int mmap_threshold) { (void)trim_threshold; (void)mmap_threshold; return 0; }
int coffer_random_bytes(void *buffer, size_t count) { (void)buffer; (void)count; errno = ENOSYS; return -1; }
int coffer_random_public_bytes(void *buffer, size_t count) { (void)buffer; (void)count; errno = ENOSYS; return -1; }
#endif

__attribute__((noinline)) void coffer_scrub_stack(size_t count) {
    if (count > (1u << 20)) count = 1u << 20;
    if (count == 0) return;
    unsigned char area[count];
    memset(area, 0, count);
    // The barrier keeps the compiler from dropping a store to memory that is never read again.
    __asm__ __volatile__("" : : "r"(area) : "memory");
}
