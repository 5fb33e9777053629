import Foundation

/// The one form of a mail user name that coffer-notify stores, compares, rate-limits, escrows under and writes into
/// Dovecot's METADATA entry: Unicode NFC, then lowercased (Unicode default case mapping, no locale), as Dovecot's
/// default `auth_username_format = %Lu` lowercases the login. The service logs in to the mail server with this
/// form, so the name it keeps is the name the server authenticated; `USER1` and `user1` are one user.
public enum MailUser {
    /// The canonical form of `name`.
    public static func canonical(_ name: String) -> String {
        name.precomposedStringWithCanonicalMapping.lowercased()
    }
}
