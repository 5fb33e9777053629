import CofferCrypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Counts occurrences of needles in a live process's memory through `/proc/<pid>/maps` and `/proc/<pid>/mem`.
///
/// The agent is not dumpable (`PR_SET_DUMPABLE 0`), so only a process with `CAP_SYS_PTRACE` (root here) can read
/// its memory; ``readable(pid:)`` says whether this run can, and the test reports instead of passing vacuously.
public enum ProcessMemory {
    /// Whether `/proc/<pid>/mem` can be read at the first readable mapping.
    public static func readable(pid: Int32) -> Bool {
        guard let first = regions(pid: pid).first else { return false }
        let fd = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 0
        return pread(fd, &byte, 1, off_t(first.start)) == 1
    }

    /// The readable, private or anonymous mappings (heap, stacks, anonymous memory), not file-backed code.
    public static func regions(pid: Int32) -> [(start: UInt64, end: UInt64)] {
        // Read to the end: procfs files report size 0, and a size-based read stops after the first page.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/maps"), let data = try? handle.readToEnd()
        else { return [] }
        let maps = String(decoding: data, as: UTF8.self)
        var result: [(UInt64, UInt64)] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let path = fields.count >= 6 ? String(fields[5]) : ""
            if path == "[vvar]" || path == "[vsyscall]" || path == "[vvar_vclock]" { continue }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt64(bounds[0], radix: 16), let end = UInt64(bounds[1], radix: 16)
            else { continue }
            result.append((start, end))
        }
        return result
    }

    /// How many times each needle occurs in the process's readable memory.
    public static func count(pid: Int32, needles: [[UInt8]]) -> [Int] {
        var counts = Array(repeating: 0, count: needles.count)
        let fd = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return counts }
        defer { close(fd) }
        let chunk = 1 << 20
        let overlap = (needles.map(\.count).min() ?? 1) - 1
        var buffer = [UInt8](repeating: 0, count: chunk + overlap)
        for region in regions(pid: pid) {
            var offset = region.start
            var carried = 0
            while offset < region.end {
                let want = Int(min(UInt64(chunk), region.end - offset))
                let got = buffer.withUnsafeMutableBytes { raw in
                    pread(fd, raw.baseAddress! + carried, want, off_t(Int64(bitPattern: offset)))
                }
                guard got > 0 else { break }
                let total = carried + got
                for (index, needle) in needles.enumerated() {
                    counts[index] += occurrences(of: needle, in: buffer[0..<total])
                }
                // Keep the tail so a needle across two reads is found once.
                carried = min(overlap, total)
                if carried > 0 { buffer.replaceSubrange(0..<carried, with: buffer[(total - carried)..<total]) }
                offset += UInt64(got)
            }
        }
        return counts
    }

    /// Occurrences of `needle` in `haystack` (the carried-over tail is shorter than any needle, so none is counted
    /// twice).
    public static func occurrences(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int {
        haystack.withUnsafeBytes { ByteSearch.count(of: needle, in: $0) }
    }
}
