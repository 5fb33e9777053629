import CCofferSystem

/// Process-wide settings that Coffer's own executables apply at start. A library user decides for their process.
public enum ProcessSettings {
    /// Makes the process's memory harder to reach for other processes of the same user: no core dumps
    /// (`RLIMIT_CORE` 0) and not dumpable (`PR_SET_DUMPABLE` 0), which also stops same-user `ptrace` and reading
    /// `/proc/<pid>/mem` without `CAP_SYS_PTRACE`.
    ///
    /// - Returns: Whether it took effect.
    @discardableResult
    public static func hardenMemory() -> Bool { coffer_set_not_dumpable() == 0 }

    /// Whether the process can be dumped or traced by its user (`PR_GET_DUMPABLE`).
    public static var isDumpable: Bool { coffer_is_dumpable() == 1 }

    /// Keeps freed heap memory for reuse instead of returning it to the kernel after every large buffer.
    ///
    /// swift-crypto returns each ciphertext in a fresh buffer; with glibc's defaults, sealing 64 KiB–1 MiB
    /// repeatedly grows and trims the heap on every call, and the page faults cost more than AES-GCM itself
    /// (the bench measured about 6× on 64 KiB envelopes). Raising the trim and mmap thresholds removes that.
    @discardableResult
    public static func tuneAllocator() -> Bool { coffer_tune_allocator(256 << 20, 32 << 20) == 1 }
}

/// The calling thread's stack.
public enum ThreadStack {
    /// Zeroes `bytes` of the calling thread's stack below the caller's frame: what the frames of calls that have
    /// returned left there (a short Swift string is held inline in a frame, not on the heap, so freeing cannot
    /// overwrite it). The agent calls it on an event loop after each request that handled mail text there
    /// (docs/ARCHITECTURE.md, "Concurrency"). The thread needs that much stack left; NIO's threads have 8 MiB.
    public static func zeroUnused(bytes: Int = 128 << 10) {
        coffer_scrub_stack(max(0, bytes))
    }
}
