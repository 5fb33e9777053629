import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A private software TPM 2.0 (`swtpm socket`) on loopback for the TPM tests, its state in a folder the test owns:
/// restarting with the same folder is a reboot of the same machine, another folder is another machine.
///
/// Started as a child process on two free consecutive ports of 127.0.0.1 (commands, then control), already past
/// TPM2_Startup; stopped by ``stop()`` or when released.
public final class SoftwareTPM {
    /// The folder that holds the TPM's persistent state (its seeds, NV indices, dictionary-attack counter).
    public let stateDirectory: String
    /// The command port on 127.0.0.1; the control port is the next one.
    public private(set) var port: Int = 0
    private var process: Process?

    /// The tpm2-tss TCTI configuration that reaches this TPM.
    public var configuration: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// Starts a software TPM whose state lives in `stateDirectory` (created if missing).
    ///
    /// - Throws: ``TestSetupError`` when swtpm is missing (run scripts/setup.sh) or does not start.
    public init(stateDirectory: String) throws {
        self.stateDirectory = stateDirectory
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        try start()
    }

    deinit { stop() }

    /// Stops the TPM (as a power cut would) and starts it again on the same state.
    public func restart() throws {
        stop()
        try start()
    }

    /// Stops the TPM process and waits for it to exit: a shutdown through its control channel (`swtpm_ioctl -s`),
    /// then SIGTERM, then SIGKILL, since swtpm can sit on a signal while a client is connected.
    public func stop() {
        guard let process else { return }
        self.process = nil
        _ = try? runCommand(["/usr/bin/env", "swtpm_ioctl", "--tcp", "127.0.0.1:\(port + 1)", "-s"])
        for signal in [SIGTERM, SIGKILL] {
            for _ in 0..<100 where process.isRunning { usleep(20_000) }
            guard process.isRunning else { break }
            kill(process.processIdentifier, signal)
        }
        process.waitUntilExit()
    }

    private func start() throws {
        var reasons: [String] = []
        for _ in 0..<8 {
            let candidate = Int.random(in: 20_000..<60_000)
            guard Self.isFree(candidate), Self.isFree(candidate + 1) else { continue }
            let child = Process()
            child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            child.arguments = [
                "swtpm", "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory)",
                "--server", "type=tcp,port=\(candidate),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(candidate + 1),bindaddr=127.0.0.1",
                "--flags", "not-need-init,startup-clear",
            ]
            child.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            child.standardError = errors
            try child.run()
            for _ in 0..<200 where child.isRunning {
                if Self.accepts(candidate + 1) && Self.accepts(candidate) {
                    process = child
                    port = candidate
                    return
                }
                usleep(25_000)
            }
            if child.isRunning { child.terminate() }
            child.waitUntilExit()
            reasons.append(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))
        }
        throw TestSetupError(reason: "swtpm did not start (run scripts/setup.sh): \(reasons.joined(separator: "; "))")
    }

    private static func isFree(_ port: Int) -> Bool {
        withSocket(port) { socket, address in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
        }
    }

    private static func accepts(_ port: Int) -> Bool {
        withSocket(port) { socket, address in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
        }
    }

    private static func withSocket(_ port: Int, _ body: (Int32, inout sockaddr_in) -> Bool) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        return body(socket, &address)
    }
}
