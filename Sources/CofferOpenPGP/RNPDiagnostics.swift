import CofferBlocking
import CofferCrypto
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// RNP's own diagnostics kept from standard error. Debian's librnp 0.16 prints parser diagnostics to standard error
/// whatever `RNP_LOG_CONSOLE` or `rnp_ffi_set_log_fd` say (docs/OPENPGP.md), some quoting the text of the input's
/// armor headers: while any RNP call made here runs, file descriptor 2 points at `/dev/null`, and it is restored
/// when the last one ends. Used by every caller of `OpenPGP` (the agent's key handler, the store's import).
///
/// - Warning: The descriptor is the process's: anything else written to standard error meanwhile (an agent's log
///   line) is lost too. RNP calls are short, except the S2K of a protected key at import.
public enum RNPDiagnostics {
    private static let state = NIOLockedValueBox<(running: Int, saved: Int32)>((0, -1))

    /// Runs `body` on ``BlockingPool`` with standard error silenced.
    public static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        try await BlockingPool.run { () throws(E) -> T in
            silence()
            defer { restore() }
            return try body()
        }
    }

    private static func silence() {
        state.withLockedValue { state in
            state.running += 1
            guard state.running == 1 else { return }
            let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
            guard null >= 0 else { return }
            state.saved = fcntl(2, F_DUPFD_CLOEXEC, 3)
            if state.saved >= 0 { dup2(null, 2) }
            close(null)
        }
    }

    private static func restore() {
        state.withLockedValue { state in
            state.running -= 1
            guard state.running == 0, state.saved >= 0 else { return }
            dup2(state.saved, 2)
            close(state.saved)
            state.saved = -1
        }
    }
}
