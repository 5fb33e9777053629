#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Something bytes can be read from, a piece at a time.
public protocol ByteSource {
    /// Fills up to `buffer.count` bytes and returns how many; 0 means the end.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(CofferCryptoError) -> Int
}

/// Something bytes can be written to.
public protocol ByteSink {
    /// Writes all of `bytes`.
    mutating func write(_ bytes: [UInt8]) throws(CofferCryptoError)
}

/// Reads from an in-memory array.
public struct BufferSource: ByteSource {
    private let bytes: [UInt8]
    private var offset = 0

    /// Reads `bytes` from the start.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Copies the next bytes into `buffer`.
    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, bytes.count - offset)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { source in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
        }
        offset += count
        return count
    }
}

/// Collects written bytes in memory.
public struct BufferSink: ByteSink {
    /// Everything written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty sink.
    public init() {}

    /// Appends `bytes`.
    public mutating func write(_ bytes: [UInt8]) { self.bytes += bytes }
}

/// Reads from an open file descriptor (which it does not close).
public struct FileDescriptorSource: ByteSource {
    private let fd: Int32

    /// Reads from `fd`.
    public init(fd: Int32) { self.fd = fd }

    /// Reads with `read(2)`, retrying on `EINTR`.
    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(CofferCryptoError) -> Int {
        while true {
            let got = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if got >= 0 { return got }
            if errno != EINTR { throw .io(operation: "read a file", errno: errno) }
        }
    }
}

/// Writes to an open file descriptor (which it does not close).
public struct FileDescriptorSink: ByteSink {
    private let fd: Int32

    /// Writes to `fd`.
    public init(fd: Int32) { self.fd = fd }

    /// Writes with `write(2)` until everything is written, retrying on `EINTR`.
    public mutating func write(_ bytes: [UInt8]) throws(CofferCryptoError) {
        let failure: Int32? = bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let wrote = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if wrote < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += wrote
            }
            return nil
        }
        if let failure { throw .io(operation: "write a file", errno: failure) }
    }
}
