import ArgumentParser
import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferAttachments
import CofferBlocking
import CofferCommandLine
import CofferCrypto
import CofferKeychain
import CofferNotifyClient
import CofferReading
import CofferStore
import CofferSync
import Foundation
import Logging
import NIOConcurrencyHelpers

/// Which strategy to authenticate with when several are active.
enum UnlockPreference: String, ExpressibleByArgument, CaseIterable {
    case pin
    case secureElement = "secure-element"
}

/// The one way a command reaches Coffer: it builds an ``AgentRequest`` and calls. When an agent runs for the home the
/// request goes over its socket; otherwise the same ``AgentDispatcher`` runs it in this process over a
/// ``GlobalContainer``, with the terminal as its conversation (PIN prompts, presence, progress), and the key leaves
/// memory when the command ends, as the seeds' Share extension does. The agent-mode CLI opens no keychain and no
/// device secret: the agent chooses the account.
final class CommandPath: Sendable {
    /// The home's folders.
    let paths: AppPaths
    private let route: Route
    private let conversation: TerminalConversation

    private enum Route {
        case agent(AgentClient)
        /// `isSetUp`: the keychain has items (else only `create` may run, so no other command makes a device secret).
        case inProcess(GlobalContainer, AgentDispatcher, isSetUp: Bool)
    }

    private init(paths: AppPaths, route: Route) {
        self.paths = paths
        self.route = route
        conversation = TerminalConversation()
    }

    /// The agent of `home` when one runs, else this process.
    static func open(_ home: HomeOptions) throws -> CommandPath {
        let paths = try home.paths()
        do {
            if let agent = try AgentClient.connect(socketPath: paths.agentSocket) {
                return CommandPath(paths: paths, route: .agent(agent))
            }
        } catch AppError.socketPathTooLong {
            // No agent can listen there either (it refuses to start), so the command works in this process.
        }
        return try inProcess(paths)
    }

    private static func inProcess(_ paths: AppPaths) throws -> CommandPath {
        // One-shot commands speak to the terminal in sentences; the dispatcher's log lines are for the agent's log.
        let logger = Logger(label: "coffer") { _ in SwiftLogNoOpLogHandler() }
        let global = GlobalContainer(paths: paths, logger: logger)
        let isSetUp = try FileKeychain.hasItems(in: paths.keychain)
        return CommandPath(
            paths: paths,
            route: .inProcess(global, AgentDispatcher(dependencies: global, socketPath: ""), isSetUp: isSetUp)
        )
    }

    /// Whether requests go to an agent.
    var isAgent: Bool {
        if case .agent = route { return true }
        return false
    }

    /// Runs `request`, with `secret` when ``AgentRequest/expectsSecret``, and returns its reply; a failure is thrown.
    /// Presence questions are asked at this terminal; progress events go to `progress`.
    @discardableResult
    func call(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        progress: (@Sendable (AgentEvent) -> Void)? = nil
    ) async throws -> AgentReply {
        switch route {
        case .agent(let client):
            return try await client.call(request, secret: secret) { event in
                switch event {
                case .presence(let reason, let seconds):
                    let confirmed = await TerminalPresence(timeoutSeconds: seconds).confirmPresence(reason: reason)
                    return AgentAnswer(confirmed: confirmed)
                case .progress, .syncProgress:
                    progress?(event)
                    return nil
                case .chunk:
                    return nil
                }
            }
        case .inProcess(_, let dispatcher, let isSetUp):
            if !isSetUp {
                // Nothing was set up here: only `create` may make the device secret and the keychain.
                switch request {
                case .create: break
                case .status: return .status(pid: 0, socket: "", accounts: [], loggedOut: [])
                default: throw AppError.noAccount
                }
            }
            conversation.onProgress(progress)
            // As in the agent: a request that reads the keychain or files runs on the blocking pool.
            return try await withTaskExecutorPreference(BlockingPool.taskExecutor) {
                try await dispatcher.perform(request, secret: secret, conversation: conversation)
            }
        }
    }

    /// The account named by `--account`, or the only one, with its status.
    func account(_ home: HomeOptions) async throws -> AccountStatus {
        guard case .account(let status) = try await call(.account(home.account)) else {
            throw AppError.malformedMessage
        }
        return status
    }

    /// The proof a request about `status`'s account takes, chosen one way for unlock, protect and logout: `none`
    /// while unprotected, else the secure element when a terminal can confirm presence (unless `--with pin`, or the
    /// PIN comes on standard input), else the PIN, read here.
    func proof(
        for status: AccountStatus,
        pinFromStdin: Bool,
        preference: UnlockPreference?
    ) throws -> (method: ProofMethod, pin: SecretBytes?) {
        let strategies = Set(status.protection)
        if strategies.contains(ProofMethod.none.rawValue) { return (.none, nil) }
        let hasElement = strategies.contains(ProofMethod.secureElement.rawValue)
        let hasPIN = strategies.contains(ProofMethod.pin.rawValue)
        let useElement: Bool
        switch preference {
        case .pin?: useElement = false
        case .secureElement?: useElement = true
        case nil: useElement = hasElement && !(hasPIN && pinFromStdin)
        }
        if useElement { return (.secureElement, nil) }
        return (.pin, try Terminal.readPIN(prompt: "PIN for \(status.account): ", fromStdin: pinFromStdin))
    }

    /// Unlocks the chosen account unless it is unlocked (the agent may hold its key already).
    ///
    /// - Returns: The account's status before, and whether it was unlocked already.
    @discardableResult
    func unlock(
        _ home: HomeOptions,
        pinFromStdin: Bool,
        preference: UnlockPreference? = nil
    ) async throws -> (status: AccountStatus, alreadyUnlocked: Bool) {
        let status = try await account(home)
        if status.unlocked { return (status, true) }
        let (method, pin) = try proof(for: status, pinFromStdin: pinFromStdin, preference: preference)
        guard
            case .unlocked(let already) = try await call(.unlock(account: status.account, method: method), secret: pin)
        else { throw AppError.malformedMessage }
        return (status, already)
    }

    /// Shows a preview the dispatcher made (an attachment or a page) with `viewer`, then has it deleted.
    ///
    /// - Returns: The viewer's exit status.
    func view(_ source: PreviewSource, account: String, viewer: String?) async throws -> Int32 {
        if case .inProcess = route {
            // This process owns the preview: a signal at the prompt must still delete it.
            CleartextCleanup.protect(parent: PreviewFolder.choose(cacheFolder: paths.cache(account)))
        }
        guard case .preview(let file, let report) = try await call(.preview(account: account, source: source)) else {
            throw AppError.malformedMessage
        }
        for line in report { Terminal.printError(line) }
        // The viewer is waited for through its termination handler on the blocking pool: no thread is held.
        let status: Int32
        do {
            status = try await ChildProcess.run(
                "/bin/sh",
                arguments: ["-c", Viewer.script(viewer), "coffer-viewer", file]
            )
            Viewer.waitIfNeeded(viewer, file: file)
        } catch {
            _ = try? await call(.previewEnd)
            throw CLIError("The viewer could not be started.")
        }
        try await call(.previewEnd)
        return status
    }

    /// Ends the connection, or drops this process's keys and closes its stores.
    func close() async {
        switch route {
        case .agent(let client): client.close()
        case .inProcess(let global, _, _):
            conversation.endPreview()
            if let registry = try? global.keymakerRegistry { await registry.shutdown() }
        }
    }

    /// Runs `body` with a path for `home` (the agent's when one runs, else this process's) and closes it after,
    /// whatever happens.
    @discardableResult
    static func with<T>(
        _ home: HomeOptions,
        _ body: (CommandPath) async throws -> T
    ) async throws -> T {
        let path = try open(home)
        do {
            let result = try await body(path)
            await path.close()
            return result
        } catch {
            await path.close()
            throw error
        }
    }
}

/// The terminal as the in-process dispatcher's conversation: presence is confirmed here, progress printed by the
/// command, and the preview folder is this process's until `preview-end` or the command's end.
final class TerminalConversation: AgentConversation {
    private let state = NIOLockedValueBox<(progress: (@Sendable (AgentEvent) -> Void)?, preview: String?)>((nil, nil))

    func onProgress(_ progress: (@Sendable (AgentEvent) -> Void)?) { state.withLockedValue { $0.progress = progress } }

    func confirmPresence(reason: String) async -> Bool { await TerminalPresence().confirmPresence(reason: reason) }

    func progress(_ progress: ImportProgress) { state.withLockedValue { $0.progress }?(.progress(progress)) }

    func syncProgress(_ progress: SyncProgress) { state.withLockedValue { $0.progress }?(.syncProgress(progress)) }

    /// The CLI never asks for chunks in this process (it previews instead); they are dropped.
    func chunk(_ bytes: ArraySlice<UInt8>) async throws {}

    func ownPreview(_ folder: String) { state.withLockedValue { $0.preview = folder } }

    func endPreview() {
        let folder = state.withLockedValue { state in
            defer { state.preview = nil }
            return state.preview
        }
        if let folder { SecureFile.removeTree(folder) }
    }
}
