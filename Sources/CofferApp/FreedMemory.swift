#if canImport(Glibc)
import Glibc
#endif

/// What the agent does so decrypted mail does not outlive a lock in freed heap memory (issue 8, item 9).
///
/// Swift `String`s and `Data` cannot be zeroed before they are freed, and the decrypted subjects, bodies and JSON
/// replies pass through many of them. glibc can do it at the allocator instead: with `M_PERTURB` every `free()`
/// fills the chunk with a byte (and every `malloc()` with its complement), and `malloc_trim(0)` hands whole free
/// pages back to the kernel, which zeroes them. glibc's per-thread cache (tcache: up to 7 freed chunks of each
/// size up to 1 KiB per thread) skips the perturbing, and a thread that lives on keeps those chunks as they were;
/// so the agent restarts itself once with the cache off (``restartWithoutThreadCache()``). See
/// `docs/THREAT-MODEL.md`, memory row.
///
/// Both calls are looked up at run time (they live in `<malloc.h>`, outside Glibc's module map), so on another C
/// library they are simply absent and this does nothing.
public enum FreedMemory {
    private typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    private typealias MallocTrim = @convention(c) (Int) -> Int32

    /// glibc's `M_PERTURB`.
    private static let perturbOption: Int32 = -6
    /// The byte freed chunks are filled with (any non-zero value enables perturbing; 0 turns it off).
    static let perturbByte: Int32 = 0x5A

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer? {
        #if canImport(Glibc)
        return dlsym(UnsafeMutableRawPointer(bitPattern: 0), name)
        #else
        return nil
        #endif
    }

    /// Makes every later `free()` overwrite what it frees. Process-wide; the agent calls it once.
    ///
    /// - Returns: Whether the allocator accepted it.
    @discardableResult
    static func overwriteOnFree() -> Bool {
        guard let address = symbol("mallopt") else { return false }
        let mallopt = unsafeBitCast(address, to: Mallopt.self)
        return mallopt(perturbOption, perturbByte) == 1
    }

    /// The glibc tunable that turns the per-thread cache off, so every `free()` takes the perturbing path.
    public static let noThreadCache = "glibc.malloc.tcache_count=0"

    /// Replaces this process image with itself (same arguments, same pid) with ``noThreadCache`` added to
    /// `GLIBC_TUNABLES`, which glibc reads only when a process starts. Call it first thing, before any secret is in
    /// memory.
    ///
    /// Returns without doing anything when the cache is already off or the C library is not glibc, and returns
    /// after a failed `execv` (the process then runs on with the cache, as before).
    public static func restartWithoutThreadCache() {
        #if canImport(Glibc)
        guard symbol("gnu_get_libc_version") != nil else { return }
        let current = getenv("GLIBC_TUNABLES").map { String(cString: $0) } ?? ""
        if current.split(separator: ":").contains(Substring(noThreadCache)) { return }
        setenv("GLIBC_TUNABLES", current.isEmpty ? noThreadCache : "\(current):\(noThreadCache)", 1)
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        #endif
    }

    /// Returns free heap pages to the kernel (which zeroes them before any reuse).
    static func releaseFreePages() {
        guard let address = symbol("malloc_trim") else { return }
        _ = unsafeBitCast(address, to: MallocTrim.self)(0)
    }
}
