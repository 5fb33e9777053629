import CofferCrypto
import CofferSampleMail
import CofferStore
import CofferTesting

#if canImport(Glibc)
import Glibc
#endif

/// Peak memory of `coffer import` on a large generated mbox: the mbox is streamed, so the resident set should stay
/// flat however large the file is. Runs the real `coffer` binary (next to this one) and reads its peak RSS from
/// `wait4`.
enum ImportMemoryBench {
    static func run(megabytes: Int) throws {
        let folder = TemporaryDirectory(prefix: "coffer-bench-rss")
        let mbox = "\(folder.path)/large.mbox"
        let bytes = try writeMbox(to: mbox, megabytes: megabytes)
        let coffer = siblingBinary("coffer")
        let home = "\(folder.path)/home"
        _ = try spawn([coffer, "init", "--home", home, "--account", "bench@example.com"])
        let start = Timer.now()
        let usage = try spawn([coffer, "import", mbox, "--home", home])
        let seconds = Double(Timer.now() - start) / 1e9
        var table = Table(
            "coffer import of a \(megabytes) MiB generated mbox (streamed)",
            ["measure", "value", "aim"]
        )
        table.add(["peak resident set (ru_maxrss)", "\(usage.maxRSSKiB / 1024) MiB", "< 200 MiB"])
        table.add(["time", "\(format(seconds, 1)) s", ""])
        table.add(["throughput", "\(format(Double(bytes) / 1e6 / seconds, 1)) MB/s", ""])
        table.print()
    }

    /// Writes generated messages (mboxrd) until the file reaches `megabytes`; returns its size.
    private static func writeMbox(to path: String, megabytes: Int) throws -> Int {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw CofferCryptoError.io(operation: "create \(path)", errno: errno) }
        defer { close(fd) }
        var sink = FileDescriptorSink(fd: fd)
        let generator = SyntheticMail(seed: 99)
        var written = 0
        var index = 0
        var buffer: [UInt8] = []
        while written < megabytes << 20 {
            buffer += Array("From bench@example.org Sat Nov 21 09:00:00 2026\n".utf8)
            for byte in generator.message(index, attachment: index % 10 == 3) where byte != 0x0D {
                buffer.append(byte)
            }
            buffer.append(0x0A)
            index += 1
            if buffer.count > 1 << 20 {
                written += buffer.count
                try sink.write(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        try sink.write(buffer)
        return written + buffer.count
    }

    /// The path of the executable `name` next to this one.
    static func siblingBinary(_ name: String) -> String {
        let me = CommandLine.arguments[0]
        guard let slash = me.lastIndex(of: "/") else { return name }
        return String(me[..<slash]) + "/" + name
    }

    struct Usage {
        /// Peak resident set (ru_maxrss).
        var maxRSSKiB: Int
        /// User plus system CPU time.
        var cpuSeconds: Double = 0
    }

    /// Runs `arguments` with standard input from the file `input` (else empty), standard output into the file
    /// `output` (else discarded), and returns its resource usage.
    static func spawn(_ arguments: [String], input: String? = nil, output: String? = nil) throws -> Usage {
        let pid = try start(arguments, input: input, output: output)
        var usage = rusage()
        var waitStatus: Int32 = 0
        guard wait4(pid, &waitStatus, 0, &usage) == pid else {
            throw CofferCryptoError.io(operation: "wait for \(arguments[0])", errno: errno)
        }
        guard waitStatus == 0 else {
            throw CofferCryptoError.io(operation: "run \(arguments.joined(separator: " "))", errno: EIO)
        }
        return usage.measured
    }

    /// Starts `arguments` as ``spawn(_:input:output:)`` does and returns its process id; the caller waits for it.
    static func start(_ arguments: [String], input: String? = nil, output: String? = nil) throws -> pid_t {
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 0, input ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let status = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
        guard status == 0 else { throw CofferCryptoError.io(operation: "start \(arguments[0])", errno: status) }
        return pid
    }
}

extension rusage {
    /// Peak resident set and CPU time, as ``ImportMemoryBench/Usage``.
    var measured: ImportMemoryBench.Usage {
        let cpu =
            Double(ru_utime.tv_sec + ru_stime.tv_sec) + Double(ru_utime.tv_usec + ru_stime.tv_usec) / 1e6
        return ImportMemoryBench.Usage(maxRSSKiB: Int(ru_maxrss), cpuSeconds: cpu)
    }
}
