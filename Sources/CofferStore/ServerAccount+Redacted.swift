/// A server account prints and mirrors without its password, so `print`, string interpolation, `dump` and a
/// debugger's view of it never show the secret.
extension ServerAccount: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The account without its password.
    public var description: String {
        "ServerAccount(\(username)@\(endpoint.host):\(endpoint.port)\(endpoint.security == .startTLS ? " STARTTLS" : ""), password: <redacted>)"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// Every field but the password.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "endpoint": endpoint, "username": username, "password": "<redacted>",
                "submission": submission as Any,
            ],
            displayStyle: .struct
        )
    }
}

/// A submission server prints and mirrors without its password.
extension SubmissionServer: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The server without its password.
    public var description: String {
        "SubmissionServer(\(url), from: \(address), username: \(username ?? "<the IMAP account's>"), password: "
            + (password == nil ? "<the IMAP account's>" : "<redacted>") + ")"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// Every field but the password.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "endpoint": endpoint, "address": address, "username": username as Any, "password": "<redacted>",
            ],
            displayStyle: .struct
        )
    }
}
