import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

/// A private temporary folder removed when the value is released.
public final class TemporaryDirectory: Sendable {
    /// The folder's path.
    public let path: String

    /// Creates a fresh folder under `$TMPDIR` (or `/tmp`).
    public init(prefix: String = "coffer-test") {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "could not create a temporary folder")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { SecureFile.removeTree(path) }

    /// Every regular file below the folder, recursively.
    public func allFiles() -> [String] { Self.files(below: path) }

    /// Every regular file below `root`, recursively (``SecureFile/files(below:)``).
    public static func files(below root: String) -> [String] { SecureFile.files(below: root) }
}

/// Searches files for byte strings (canary scans).
public enum CanaryScanner {
    /// The files under `roots` that contain any of `needles`, with the needle's index.
    public static func occurrences(of needles: [[UInt8]], under roots: [String]) -> [(file: String, needle: Int)] {
        var hits: [(String, Int)] = []
        for root in roots {
            for file in TemporaryDirectory.files(below: root) {
                guard let bytes = try? SecureFile.read(file, maxBytes: 1 << 30) else { continue }
                for (index, needle) in needles.enumerated() where ByteSearch.contains(needle, in: bytes) {
                    hits.append((file, index))
                }
            }
        }
        return hits
    }
}
