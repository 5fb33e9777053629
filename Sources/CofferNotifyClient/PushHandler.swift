import CofferBlocking
import CofferCrypto
import CofferPush
import Foundation

/// The notification extension's work: open one push with the session's key, without the MainKey, and read it.
public enum PushHandler {
    /// Opens and parses one push body (the raw 4096-byte RFC 8291 message).
    ///
    /// - Throws: ``NotifyClientError/pushNotForThisSession`` for a body sealed to another session or changed,
    ///   ``NotifyClientError/malformedPush(_:)`` for content that is not a version 1 or 2 Coffer push.
    public static func open(_ body: [UInt8], keys: WebPush.UserAgentKeys) throws(NotifyClientError) -> PushMessage {
        let plaintext: [UInt8]
        do {
            plaintext = try keys.open(body)
        } catch {
            throw .pushNotForThisSession
        }
        guard let message = try? JSONDecoder().decode(PushMessage.self, from: Data(plaintext)) else {
            throw .malformedPush("it is not the JSON of a push message")
        }
        guard message.v == 1 || message.v == 2 else { throw .malformedPush("version \(message.v) is not supported") }
        guard message.v == 2 || message.fastSync == nil else { throw .malformedPush("a version 1 push has no key") }
        guard message.type == "new-mail" else { throw .malformedPush("the type is not new-mail") }
        return message
    }

    /// Reads a body given on standard input: the raw bytes, or base64url text as the stream carries it.
    public static func body(fromInput input: [UInt8]) -> [UInt8] {
        let text = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if input.count != WebPush.standardBodyLength, !text.isEmpty, let decoded = Base64URL.decode(text) {
            return decoded
        }
        return input
    }

    /// Runs `notify-send` when it is installed and a desktop session is there; true when it succeeded. The text
    /// goes as arguments to the child, never through a shell or a file. The child is started on the blocking pool
    /// and waited for without holding a thread (``ChildProcess``).
    public static func desktopNotification(_ push: PushMessage) async -> Bool {
        await desktopNotification(
            title: "New mail from \(PushMessage.clean(push.from ?? "unknown sender"))",
            body: PushMessage.clean(push.subject ?? "(no subject)")
        )
    }

    /// Runs `notify-send` with `title` and `body` (control characters dropped, each cut to 200 characters) when it
    /// is installed and a desktop session is there; true when it succeeded.
    public static func desktopNotification(title: String, body: String) async -> Bool {
        guard let path = notifySend() else { return false }
        let arguments = ["--app-name=Coffer", "--", PushMessage.clean(title), PushMessage.clean(body)]
        let status = try? await ChildProcess.run(path, arguments: arguments, discardingOutput: true)
        return status == 0
    }

    /// `notify-send`'s path and arguments for `push`, or `nil` without a desktop session or `notify-send`.
    static func notifySend(_ push: PushMessage) -> (path: String, arguments: [String])? {
        guard let path = notifySend() else { return nil }
        return (
            path,
            [
                "--app-name=Coffer", "--",
                "New mail from \(PushMessage.clean(push.from ?? "unknown sender"))",
                PushMessage.clean(push.subject ?? "(no subject)"),
            ]
        )
    }

    /// `notify-send`'s path, or `nil` without a desktop session or `notify-send`.
    private static func notifySend() -> String? {
        let environment = ProcessInfo.processInfo.environment
        guard
            environment["DBUS_SESSION_BUS_ADDRESS"] != nil || environment["DISPLAY"] != nil
                || environment["WAYLAND_DISPLAY"] != nil
        else { return nil }
        let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/notify-send" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        return path
    }
}
