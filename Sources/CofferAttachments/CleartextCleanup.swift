import CofferCrypto
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Deletes this process's cleartext folders (decrypted previews, the editor's file of a message being written) when
/// SIGINT, SIGTERM or SIGHUP arrives, then ends the process by that signal, so Ctrl-C or a closed terminal leaves no
/// cleartext behind.
///
/// Such folders are named `<pid>-<nonce>` (``SecureFile/makeProcessFolder(under:)``) under a parent; on a signal every
/// such folder of this process under every parent handed to ``protect(parent:)`` is deleted. SIGKILL cannot be
/// caught: what it leaves is deleted by the next process that sweeps the parent
/// (``PreviewFolder/removeFoldersOfEndedProcesses(under:)``), and the parent is a memory file system whenever one is
/// available (``PreviewFolder``).
///
/// The handler is installed with `sigaction` before ``protect(parent:)`` returns and only writes the signal's number
/// to a pipe (async-signal-safe); a thread of its own reads the pipe and deletes. An earlier version ignored the
/// signals and let a dispatch signal source take them: on Linux that source registers a `signalfd` later, on another
/// thread, and a signal sent in between was discarded, so a SIGTERM at the prompt left the page behind.
public enum CleartextCleanup {
    private static let parents = NIOLockedValueBox<Set<String>?>(nil)
    /// How many callers are inside ``leavingInterruptsToChild(isolation:_:)``.
    private static let interruptsLeftToChild = NIOLockedValueBox(0)
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    /// The pipe the handler writes to: read end, write end. Set once, before any handler is installed.
    nonisolated(unsafe) private static var pipeEnds: (read: Int32, write: Int32) = (-1, -1)

    /// Starts guarding this process's folders under `parent` (idempotent).
    public static func protect(parent: String) {
        parents.withLockedValue { parents in
            if parents == nil {
                installHandlers()
                parents = []
            }
            parents?.insert(parent)
        }
    }

    /// Runs `body` (which runs a child on the terminal, such as an editor) with SIGINT left to the child: Ctrl-C
    /// reaches the whole foreground process group, and an editor uses it for itself (vim cancels a command), so this
    /// process neither deletes the child's file nor ends meanwhile, as `git commit` ignores SIGINT while its editor
    /// runs. SIGTERM and SIGHUP still delete and end. The handlers stay installed (not `SIG_IGN`), so the child starts
    /// with the default action for SIGINT.
    public static func leavingInterruptsToChild<T, E: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws(E) -> T
    ) async throws(E) -> T {
        interruptsLeftToChild.withLockedValue { $0 += 1 }
        defer { interruptsLeftToChild.withLockedValue { $0 -= 1 } }
        return try await body()
    }

    private static func installHandlers() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let readEnd = ends[0]
        pipeEnds = (ends[0], ends[1])
        let thread = Thread {
            var number: Int32 = 0
            while true {
                let count = withUnsafeMutableBytes(of: &number) { read(readEnd, $0.baseAddress, $0.count) }
                if count == MemoryLayout<Int32>.size {
                    if number == SIGINT && interruptsLeftToChild.withLockedValue({ $0 > 0 }) { continue }
                    cleanUpAndExit(number)
                }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return }
            }
        }
        thread.start()
        for signalNumber in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                var number = number
                let saved = errno
                _ = withUnsafeBytes(of: &number) { write(CleartextCleanup.pipeEnds.write, $0.baseAddress, $0.count) }
                errno = saved
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signalNumber, &action, nil)
        }
    }

    /// Deletes this process's folders under every guarded parent.
    static func removeOwnFolders() {
        let prefix = "\(getpid())-"
        for parent in parents.withLockedValue({ $0 ?? [] }) {
            for name in (try? SecureFile.list(parent)) ?? [] where name.hasPrefix(prefix) {
                SecureFile.removeTree("\(parent)/\(name)")
            }
        }
    }

    private static func cleanUpAndExit(_ signalNumber: Int32) {
        removeOwnFolders()
        let notice = Array("\nInterrupted; the decrypted copy was deleted.\n".utf8)
        _ = notice.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        // End by the signal itself, so the shell sees what happened: restore the default action, make sure this
        // thread does not block the signal, and raise it here, which ends the process before `raise` returns.
        // `_exit` is only the fallback.
        signal(signalNumber, SIG_DFL)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, signalNumber)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(signalNumber)
        _exit(128 + signalNumber)
    }
}
