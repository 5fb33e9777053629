import CofferIMAP
import Foundation

/// Checks a user's mail credentials; the service never keeps the password.
public protocol MailAuthenticator: Sendable {
    /// Returns normally when the mail server accepts `user` and `password`.
    ///
    /// - Throws: `NotifyError.wrongCredentials` when it refuses them, `.mailServerUnavailable` when it cannot say.
    func verify(user: String, password: String) async throws(NotifyError)
}

/// Logs in once to the configured IMAP server over pinned TLS (CofferIMAP), sets the Dovecot METADATA entry that
/// turns on the `ox` push driver for the user, and logs out.
public struct IMAPMailAuthenticator: MailAuthenticator {
    /// The server-level entry Dovecot's ox driver reads: events are sent only for users who have it.
    public static let dovecotPushEntry = "/private/vendor/vendor.dovecot/http-notify"
    /// The server and its pins.
    public let configuration: IMAPConfiguration

    /// Creates an authenticator for one IMAP server.
    public init(configuration: IMAPConfiguration) { self.configuration = configuration }

    /// See ``MailAuthenticator/verify(user:password:)``.
    public func verify(user: String, password: String) async throws(NotifyError) {
        let client: IMAPClient
        do {
            client = try await IMAPClient.connect(configuration)
        } catch {
            throw .mailServerUnavailable(error.description)
        }
        do {
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
