#if canImport(Glibc)
import Glibc
#endif

/// Process-wide settings that Coffer's own executables apply at start. A library user decides for their process.
public enum ProcessSettings {
    /// Keeps freed heap memory for reuse instead of returning it to the kernel after every large buffer.
    ///
    /// swift-crypto returns each ciphertext in a fresh buffer; with glibc's defaults, sealing 64 KiB–1 MiB
    /// repeatedly grows and trims the heap on every call, and the page faults cost more than AES-GCM itself
    /// (the bench measured about 6× on 64 KiB envelopes). Raising the trim and mmap thresholds removes that.
    public static func tuneAllocator() {
        #if os(Linux)
        // <malloc.h> is not in Glibc's module map; M_TRIM_THRESHOLD is -1 and M_MMAP_THRESHOLD is -3 in glibc's ABI.
        _ = glibcMallopt(-1, 256 << 20)
        _ = glibcMallopt(-3, 32 << 20)
        #endif
    }
}

#if os(Linux)
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif
