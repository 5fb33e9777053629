import CofferApp
import CofferCrypto
import CofferKeymaker
import CofferStore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension CofferHome {
    /// The same folders for CofferApp.
    var appPaths: AppPaths { AppPaths(data: data, keychain: keychain, state: state) }
}

/// What the mail commands read and import through: the store itself (one-shot) or the agent.
protocol MailReading: Sendable {
    func list(label: String?, limit: Int, offset: Int) async throws -> [MessageSummary]
    func search(_ query: String, limit: Int, offset: Int) async throws -> [MessageSummary]
    /// The message opened to be read (marked seen).
    func readMessage(_ id: Int64) async throws -> MessageDetail
    func attachments(of messageID: Int64) async throws -> [AttachmentInfo]
    func attachmentContent(_ id: Int64) async throws -> (info: AttachmentInfo, content: [UInt8])
    func importSource(
        at path: String,
        label: String,
        batchSize: Int,
        progress: @Sendable (ImportProgress) -> Void
    ) async throws -> ImportProgress
    func close() throws
}

extension MailStore: MailReading {}

/// The mail of one account, served by the agent.
struct AgentMail: MailReading {
    let agent: AgentClient
    let account: String

    private func request(_ op: AgentOperation) -> AgentRequest { AgentRequest(op, account: account) }

    func list(label: String?, limit: Int, offset: Int) async throws -> [MessageSummary] {
        var request = request(.list)
        (request.label, request.limit, request.offset) = (label, limit, offset)
        return try await agent.call(request).summaries ?? []
    }

    func search(_ query: String, limit: Int, offset: Int) async throws -> [MessageSummary] {
        var request = request(.search)
        (request.words, request.limit, request.offset) = (query, limit, offset)
        return try await agent.call(request).summaries ?? []
    }

    func readMessage(_ id: Int64) async throws -> MessageDetail {
        var request = request(.message)
        request.id = id
        guard let message = try await agent.call(request).message else { throw AppError.malformedMessage }
        return message
    }

    func attachments(of messageID: Int64) async throws -> [AttachmentInfo] {
        var request = request(.attachments)
        request.id = messageID
        return try await agent.call(request).attachments ?? []
    }

    func attachmentContent(_ id: Int64) async throws -> (info: AttachmentInfo, content: [UInt8]) {
        var request = request(.attachmentContent)
        request.id = id
        let reply = try await agent.call(request)
        guard let info = reply.attachment, let content = reply.content else { throw AppError.malformedMessage }
        return (info, Array(content))
    }

    func importSource(
        at path: String,
        label: String,
        batchSize: Int,
        progress: @Sendable (ImportProgress) -> Void
    ) async throws -> ImportProgress {
        var request = request(.import)
        (request.path, request.label, request.batch) = (AgentLink.absolute(path), label, batchSize)
        let reply = try await agent.call(request) { event in
            if let counts = event.progress { progress(counts) }
            return nil
        }
        guard let imported = reply.imported else { throw AppError.malformedMessage }
        return imported
    }

    func close() throws { agent.close() }
}

/// The CLI's side of the extension model: when an agent runs for the home, commands go to it.
enum AgentLink {
    /// The agent of `home`, or `nil` when none runs (the command then works one-shot).
    static func connect(_ home: HomeOptions) throws -> AgentClient? {
        do {
            return try AgentClient.connect(socketPath: home.resolve().appPaths.agentSocket)
        } catch AppError.socketPathTooLong {
            // No agent can listen there either (it refuses to start), so the command works one-shot.
            return nil
        }
    }

    /// The account named by `--account`, or the only one (read from the keychain, as one-shot commands do).
    static func account(_ home: HomeOptions) throws -> String {
        try home.resolve().open().chooseAccount(home.account)
    }

    /// `path` made absolute against the current folder (the agent runs elsewhere).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }

    /// The status of `account` in the agent.
    static func status(_ agent: AgentClient, account: String?) async throws -> (pid: Int32, [AccountStatus]) {
        let reply = try await agent.call(AgentRequest(.status, account: account))
        return (reply.pid ?? 0, reply.accounts ?? [])
    }

    /// Unlocks `account` in the agent unless it is unlocked: the PIN is read here and sent over the uid-checked
    /// socket; for the secure element, presence is confirmed at this terminal when the agent asks.
    ///
    /// - Returns: Whether it was already unlocked.
    @discardableResult
    static func unlock(
        _ agent: AgentClient,
        account: String,
        pinFromStdin: Bool,
        preference: UnlockPreference?
    ) async throws -> Bool {
        guard let current = try await status(agent, account: account).1.first else { throw AppError.noAccount }
        if current.unlocked { return true }
        let strategies = Set(current.protection)
        var request = AgentRequest(.unlock, account: account)
        var secret: SecretBytes?
        if strategies.contains("none") {
            request.method = "none"
        } else {
            let useElement: Bool
            switch preference {
            case .pin?: useElement = false
            case .secureElement?: useElement = true
            case nil:
                useElement = strategies.contains("secure-element") && !(strategies.contains("pin") && pinFromStdin)
            }
            if useElement {
                request.method = "secure-element"
            } else {
                request.method = "pin"
                secret = try Terminal.readPIN(prompt: "PIN for \(account): ", fromStdin: pinFromStdin)
            }
        }
        let reply = try await agent.call(request, secret: secret) { event in
            guard event.event == "presence" else { return nil }
            let presence = TerminalPresence(timeoutSeconds: event.seconds ?? 120)
            let confirmed = await presence.confirmPresence(reason: event.reason ?? "Unlock Coffer.")
            return AgentAnswer(confirmed: confirmed)
        }
        return reply.alreadyUnlocked ?? false
    }

    /// One account's lines of `coffer status` in agent mode.
    static func describe(_ status: AccountStatus) -> [String] {
        var lines = [
            "account: \(status.account)",
            "  protection: \((status.protectionDescriptions ?? status.protection).joined(separator: " + "))",
        ]
        if let failures = status.failedAttempts { lines.append("  failed PIN attempts: \(failures) of 10") }
        if status.unlocked {
            lines.append("  state: unlocked (the agent holds the key)")
            switch (status.autolock, status.secondsUntilAutolock) {
            case (let policy?, let seconds?): lines.append("  autolock: in \(seconds) s (policy \(policy))")
            case ("background"?, nil):
                lines.append("  autolock: when the app goes to the background (`coffer background`)")
            case (let policy?, nil): lines.append("  autolock: \(policy)")
            default: break
            }
        } else {
            lines.append("  state: locked (run `coffer unlock` to give the agent the key)")
        }
        return lines
    }

    /// `attachment open` through the agent: it decrypts into a private folder it owns, the viewer runs here, and
    /// the agent deletes the file when told (or when this connection closes).
    static func openAttachment(_ mail: MailSession, agent: AgentClient, id: Int64, viewer: String?) async throws {
        var request = AgentRequest(.preview, account: mail.session.account)
        request.id = id
        let reply = try await agent.call(request)
        guard let path = reply.path else { throw AppError.malformedMessage }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", Viewer.script(viewer), "coffer-viewer", path]
        let status: Int32
        do {
            try process.run()
            process.waitUntilExit()
            status = process.terminationStatus
            Viewer.waitIfNeeded(viewer, file: path)
        } catch {
            _ = try? await agent.call(AgentRequest(.previewEnd, account: mail.session.account))
            throw CLIError("The viewer could not be started.")
        }
        _ = try await agent.call(AgentRequest(.previewEnd, account: mail.session.account))
        guard status == 0 else {
            throw CLIError("The viewer failed (exit status \(status)); the decrypted copy was deleted.")
        }
        print("The viewer exited with status \(status); the decrypted copy was deleted.")
    }

    /// `attachment save` through the agent.
    static func saveAttachment(_ mail: MailSession, agent: AgentClient, id: Int64, to path: String) async throws {
        var request = AgentRequest(.save, account: mail.session.account)
        request.id = id
        request.path = absolute(path)
        _ = try await agent.call(request)
        print("Saved attachment \(id) to \(path).")
    }
}
