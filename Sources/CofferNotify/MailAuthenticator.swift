import CofferIMAP
import Foundation

/// Checks a user's mail credentials; the service never keeps the password.
public protocol MailAuthenticator: Sendable {
    /// Returns normally when the mail server accepts `user` and `password`.
    ///
    /// - Throws: `NotifyError.wrongCredentials` when it refuses them, `.mailServerUnavailable` when it cannot say.
    func verify(user: String, password: String) async throws(NotifyError)

    /// ``verify(user:password:)`` on behalf of `client`, whose address the mail server is told where it can be
    /// (the default ignores it).
    ///
    /// - Throws: as ``verify(user:password:)``.
    func verify(user: String, password: String, client: ClientOrigin) async throws(NotifyError)
}

extension MailAuthenticator {
    /// Forwards to ``verify(user:password:)``: an authenticator that cannot pass the address on ignores it.
    public func verify(user: String, password: String, client: ClientOrigin) async throws(NotifyError) {
        try await verify(user: user, password: password)
    }
}

/// Logs in once to the configured IMAP server over pinned TLS (CofferIMAP), sets the Dovecot METADATA entry that
/// turns on the `ox` push driver for the user, and logs out. Before logging in it names the client with IMAP `ID`
/// (`x-originating-ip`, `x-originating-port`), so that Dovecot's failure penalty and its log name the client.
///
/// - Warning: Dovecot believes the ID fields only from its `login_trusted_networks`; list the service's address
///   there, or every login looks as if it came from the service and Dovecot's penalty slows every user together.
public struct IMAPMailAuthenticator: MailAuthenticator {
    /// The server-level entry Dovecot's ox driver reads: events are sent only for users who have it.
    public static let dovecotPushEntry = "/private/vendor/vendor.dovecot/http-notify"
    /// The server and its pins.
    public let configuration: IMAPConfiguration

    /// Creates an authenticator for one IMAP server.
    public init(configuration: IMAPConfiguration) { self.configuration = configuration }

    /// See ``MailAuthenticator/verify(user:password:)``; the mail server is told no client address.
    public func verify(user: String, password: String) async throws(NotifyError) {
        try await verify(user: user, password: password, origin: nil)
    }

    /// See ``MailAuthenticator/verify(user:password:client:)``.
    public func verify(user: String, password: String, client: ClientOrigin) async throws(NotifyError) {
        try await verify(user: user, password: password, origin: client)
    }

    /// The ID fields naming `origin`: none when its address is not an IP address (the in-process router's
    /// `unknown`).
    static func idFields(_ origin: ClientOrigin) -> [(String, String)] {
        guard origin.isIPAddress else { return [] }
        return [("x-originating-ip", origin.address)] + (origin.port.map { [("x-originating-port", "\($0)")] } ?? [])
    }

    private func verify(user: String, password: String, origin: ClientOrigin?) async throws(NotifyError) {
        let client: IMAPClient
        do {
            client = try await IMAPClient.connect(configuration)
        } catch {
            throw .mailServerUnavailable(error.description)
        }
        do {
            let fields = origin.map(Self.idFields) ?? []
            if !fields.isEmpty, await client.capabilities.contains("ID") {
                do {
                    try await client.id(fields)
                } catch .commandFailed {
                    // A server may refuse ID; the login goes on, under the service's own address.
                }
            }
            try await client.login(user: user, password: password)
            // Best effort: a server without METADATA or the push plugin still authenticates; it sends no events.
            try? await client.setMetadata(
                mailbox: "",
                entries: [(name: Self.dovecotPushEntry, value: Array("user=\(user)".utf8))]
            )
            await client.logout()
        } catch {
            await client.logout()
            // A tagged NO is the server's answer to the credentials; anything else is not an answer.
            if case .commandFailed(_, let status, _, _) = error, status == "NO" { throw .wrongCredentials }
            throw .mailServerUnavailable(error.description)
        }
    }
}
