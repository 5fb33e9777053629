import CofferCrypto
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Deletes this process's decrypted previews when SIGINT, SIGTERM or SIGHUP arrives, then ends the process by that
/// signal, so Ctrl-C or a closed terminal at the "press Enter" prompt leaves no cleartext behind.
///
/// Previews live in folders named `<pid>-<nonce>` under a preview parent; on a signal every such folder of this
/// process under every parent handed to ``protect(parent:)`` is deleted. The handler runs on a dispatch queue (a
/// signal source), not inside a raw signal handler, so it may use the file system. SIGKILL cannot be caught: what it
/// leaves is deleted by the next command that opens the cache (``AttachmentCache/removeLeftovers()``), and the
/// preview parent is a memory file system whenever one is available (``PreviewFolder``).
enum PreviewCleanup {
    private static let state = Mutex<(parents: Set<String>, sources: [any DispatchSourceSignal])>(([], []))
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// Starts guarding the previews of this process under `parent` (idempotent).
    static func protect(parent: String) {
        state.withLock { state in
            state.parents.insert(parent)
            guard state.sources.isEmpty else { return }
            for signalNumber in signals {
                // The default action would end the process at once; the source below gets the signal instead.
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { cleanUpAndExit(signalNumber) }
                source.resume()
                state.sources.append(source)
            }
        }
    }

    /// Deletes this process's preview folders under every guarded parent.
    static func removeOwnPreviews() {
        let prefix = "\(getpid())-"
        for parent in state.withLock({ $0.parents }) {
            for name in (try? SecureFile.list(parent)) ?? [] where name.hasPrefix(prefix) {
                SecureFile.removeTree("\(parent)/\(name)")
            }
        }
    }

    private static func cleanUpAndExit(_ signalNumber: Int32) {
        removeOwnPreviews()
        Terminal.writeString("\nInterrupted; the decrypted copy was deleted.\n", to: 2)
        // End by the signal itself, so the shell sees what happened: restore the default action, make sure this
        // thread does not block the signal (the dispatch source may have), and raise it here, which ends the process
        // before `raise` returns. `_exit` is only the fallback.
        signal(signalNumber, SIG_DFL)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, signalNumber)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(signalNumber)
        _exit(128 + signalNumber)
    }
}
