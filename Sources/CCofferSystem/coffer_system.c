#include "coffer_system.h"

#include <errno.h>

#ifdef __linux__
#include <malloc.h>
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
#else
int coffer_set_not_dumpable(void) { return -1; }
int coffer_is_dumpable(void) { return -1; }
int coffer_tune_allocator(int trim_threshold, int mmap_threshold) { (void)trim_threshold; (void)mmap_threshold; return 0; }
int coffer_random_bytes(void *buffer, size_t count) { (void)buffer; (void)count; errno = ENOSYS; return -1; }
#endif
