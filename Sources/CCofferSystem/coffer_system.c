#include "coffer_system.h"

#ifdef __linux__
#include <malloc.h>
#include <sys/prctl.h>
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
#else
int coffer_set_not_dumpable(void) { return -1; }
int coffer_is_dumpable(void) { return -1; }
int coffer_tune_allocator(int trim_threshold, int mmap_threshold) { (void)trim_threshold; (void)mmap_threshold; return 0; }
#endif
