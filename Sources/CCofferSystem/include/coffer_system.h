#ifndef COFFER_SYSTEM_H
#define COFFER_SYSTEM_H

#include <stddef.h>

/// Marks the process not dumpable (prctl PR_SET_DUMPABLE 0): no core dumps, no same-user ptrace or
/// /proc/<pid>/mem access without CAP_SYS_PTRACE. Returns 0 on success, -1 with errno set otherwise.
int coffer_set_not_dumpable(void);

/// Returns 1 if the process is dumpable, 0 if not, -1 on error.
int coffer_is_dumpable(void);

/// Sets mallopt's trim and mmap thresholds (glibc). Returns 1 when both were accepted.
int coffer_tune_allocator(int trim_threshold, int mmap_threshold);

/// Fills `count` bytes with the kernel's CSPRNG (getrandom(2), blocking only until the pool is first seeded),
/// in as few system calls as the kernel allows (one for up to 256 bytes). Returns 0, or -1 with errno set.
int coffer_random_bytes(void *buffer, size_t count);

/// Fills `count` (at most 64) bytes of a public random value (a nonce, a salt) from a process-wide buffer of the
/// kernel's CSPRNG output, refilled with one getrandom(2) call per 4,032 bytes. Each byte is handed out once and
/// then overwritten. The buffer lives in a page marked MADV_WIPEONFORK, so a forked child finds it empty and
/// refills it from the kernel instead of repeating its parent's values; where the kernel refuses that mark, every
/// call goes to getrandom(2). Never for key material. Returns 0, or -1 with errno set.
int coffer_random_public_bytes(void *buffer, size_t count);

/// Zeroes `count` bytes (at most 1 MiB) of the calling thread's stack below the caller's frame, where the frames of
/// calls that have returned left their locals. The thread's stack must have that much room left.
void coffer_scrub_stack(size_t count);

#endif
