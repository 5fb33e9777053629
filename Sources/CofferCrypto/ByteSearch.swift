#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Byte-string search for the canary scans of files and memory: `memchr` for the first byte, then `memcmp`.
public enum ByteSearch {
    /// How many times `needle` occurs in `haystack`, overlapping occurrences included; 0 for an empty needle.
    public static func count(of needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Int {
        var found = 0
        forEachOccurrence(of: needle, in: haystack) {
            found += 1
            return true
        }
        return found
    }

    /// Whether `haystack` contains `needle` (`false` for an empty needle).
    public static func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        var found = false
        haystack.withUnsafeBytes { bytes in
            forEachOccurrence(of: needle, in: bytes) {
                found = true
                return false
            }
        }
        return found
    }

    /// Calls `body` at each occurrence until it returns `false`.
    private static func forEachOccurrence(
        of needle: [UInt8],
        in haystack: UnsafeRawBufferPointer,
        _ body: () -> Bool
    ) {
        guard let base = haystack.baseAddress, let first = needle.first else { return }
        needle.withUnsafeBytes { pattern in
            var offset = 0
            while haystack.count - offset >= needle.count {
                let span = haystack.count - offset - needle.count + 1
                guard let hit = memchr(base + offset, Int32(first), span) else { return }
                let position = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + position, pattern.baseAddress!, needle.count) == 0, !body() { return }
                offset = position + 1
            }
        }
    }
}
