import CofferCrypto
import NIOConcurrencyHelpers
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The POSIX calls behind the agent socket: bind, connect, peer credentials, reads and writes with deadlines.
package enum AgentSocket {
    /// The peer's process, user and group ids, as `SO_PEERCRED` reports them.
    public struct PeerCredentials: Sendable, Equatable {
        /// Process id.
        public var pid: Int32
        /// User id.
        public var uid: UInt32
        /// Group id.
        public var gid: UInt32
    }

    /// The credentials of the process at the other end of `fd` (the kernel's word, not the peer's).
    public static func peer(_ fd: Int32) throws(AppError) -> PeerCredentials {
        // struct ucred: pid_t pid; uid_t uid; gid_t gid.
        var raw: (Int32, UInt32, UInt32) = (0, 0, 0)
        var size = socklen_t(MemoryLayout.size(ofValue: raw))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &size) == 0 else {
            throw .socket(operation: "read the peer's credentials", errno: errno)
        }
        return PeerCredentials(pid: raw.0, uid: raw.1, gid: raw.2)
    }

    static func address(_ path: String) throws(AppError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw .socketPathTooLong(path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            raw[bytes.count] = 0
        }
        return address
    }

    static func makeSocket() throws(AppError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .socket(operation: "create a socket", errno: errno) }
        return fd
    }

    /// Connects to the agent at `path`; `nil` when no agent listens there (no file, or a stale one).
    ///
    /// - Throws: ``AppError/wrongPeer`` when the listener is another user's process.
    public static func connect(_ path: String) throws(AppError) -> Int32? {
        var address = try address(path)
        let fd = try makeSocket()
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 {
            let code = errno
            close(fd)
            if code == ENOENT || code == ECONNREFUSED || code == ENOTDIR { return nil }
            throw .socket(operation: "connect to \(path)", errno: code)
        }
        let owner: PeerCredentials
        do {
            owner = try peer(fd)
        } catch {
            close(fd)
            throw error
        }
        guard owner.uid == getuid() else {
            close(fd)
            throw .wrongPeer
        }
        return fd
    }

    /// Claims `path` for an agent: makes its 0700 folder, takes the lock file beside it, and removes a stale socket
    /// file of a killed agent; a live agent's lock is not taken.
    ///
    /// - Returns: The lock file's descriptor (keep it open while serving).
    /// - Throws: ``AppError/agentRunning(socket:)`` when another agent holds the lock; socket errors.
    package static func claim(_ path: String) throws(AppError) -> Int32 {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        do { try SecureFile.makePrivateDirectory(folder) } catch {
            throw .socket(operation: "create the folder \(folder)", errno: EACCES)
        }
        _ = try address(path)
        let lockPath = path.hasSuffix(".sock") ? String(path.dropLast(5)) + ".lock" : path + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw .socket(operation: "open \(lockPath)", errno: errno) }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw .agentRunning(socket: path)
        }
        // Holding the lock, any socket file left is a killed agent's.
        unlink(path)
        return lock
    }

    /// Milliseconds on the monotonic clock.
    static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    /// Waits until `fd` is readable, up to `milliseconds` (negative: forever). `false` on timeout.
    static func waitReadable(_ fd: Int32, milliseconds: Int64) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let start = nowMilliseconds()
        while true {
            let left = milliseconds < 0 ? -1 : max(0, milliseconds - (nowMilliseconds() - start))
            let result = poll(&entry, 1, Int32(clamping: left))
            if result > 0 { return true }
            if result == 0 { return false }
            if errno != EINTR { return true }
        }
    }
}

/// The client's framed connection to the agent (blocking calls: the CLI does one thing at a time).
///
/// Writes are serialised by a lock. ``close()`` may come from another thread while a reader waits: it shuts the
/// socket down (which wakes the reader) and wipes the decoder under its lock; the descriptor itself is closed only in
/// `deinit`, when no reader can still use it, so its number cannot be reused under a reader.
package final class AgentConnection: Sendable {
    /// The descriptor.
    public let fd: Int32
    private let decoder: NIOLockedValueBox<FrameDecoder>
    private let writeLock = NIOLock()
    private let closed = Atomic<Bool>(false)

    /// Wraps a connected descriptor; frames larger than `maximumIncoming` bytes are refused.
    public init(fd: Int32, maximumIncoming: Int) {
        self.fd = fd
        decoder = NIOLockedValueBox(FrameDecoder(maximumPayload: maximumIncoming))
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        decoder.withLockedValue { $0.wipe() }
        Glibc.close(fd)
    }

    /// Ends the connection (once): shuts the socket down, which wakes a waiting reader, and zeroes buffered bytes.
    public func close() {
        if closed.exchange(true, ordering: .acquiringAndReleasing) { return }
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
        decoder.withLockedValue { $0.wipe() }
    }

    /// Writes one frame.
    public func send(_ kind: AgentFrame.Kind, _ payload: [UInt8]) throws(AppError) {
        var bytes = AgentFrame(kind: kind, payload: payload).encoded
        defer { for index in bytes.indices { bytes[index] = 0 } }
        let failure: Int32? = writeLock.withLock {
            var sent = 0
            while sent < bytes.count {
                let result = bytes[sent...].withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if result < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                sent += result
            }
            return nil
        }
        if let failure { throw .socket(operation: "send", errno: failure) }
    }

    /// Reads the next frame. Waits up to `idle` ms for its first byte (`nil` result on a clean end or idle
    /// timeout between frames) and then up to `frame` ms for the rest.
    ///
    /// - Throws: ``AppError/frame(_:)`` for a bad, oversized or cut-off frame.
    public func receive(idle: Int64, frame: Int64) throws(AppError) -> AgentFrame? {
        var deadline: Int64? =
            decoder.withLockedValue { $0.hasPartialFrame } ? AgentSocket.nowMilliseconds() + frame : nil
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        defer { for index in chunk.indices { chunk[index] = 0 } }
        while true {
            let next = decoder.withLockedValue { decoder in Result { () throws(FrameError) in try decoder.next() } }
            switch next {
            case .success(let ready?): return ready
            case .success(nil): break
            case .failure(let error): throw .frame(error)
            }
            let wait = deadline.map { max(0, $0 - AgentSocket.nowMilliseconds()) } ?? idle
            guard AgentSocket.waitReadable(fd, milliseconds: wait) else {
                if deadline != nil { throw .frame(.incomplete) }
                return nil
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                if decoder.withLockedValue({ $0.hasPartialFrame }) { throw .frame(.incomplete) }
                return nil
            }
            decoder.withLockedValue { $0.feed(chunk[0..<count]) }
            if deadline == nil { deadline = AgentSocket.nowMilliseconds() + frame }
        }
    }
}
