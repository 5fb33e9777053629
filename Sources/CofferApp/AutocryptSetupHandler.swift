import CofferAgentProtocol
import CofferCrypto
import CofferMIME
import CofferOpenPGP
import CofferStore
import Foundation

/// The Autocrypt Setup Message (Autocrypt Level 1): the user's default secret key for another device, encrypted
/// under a Setup Code the person types there (`coffer key autocrypt --setup-message`), and the other direction,
/// importing one (`--import-setup`). The code comes from the command in a secret frame and is wiped after use; the
/// secret key leaves the store only encrypted under it.
public struct AutocryptSetupHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasAccount & HasMailStore & HasAccountCoordinator & HasOutboxEvents

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// A new Setup Code (nine blocks of four digits from the CSPRNG), for the command to show once and send back.
    public static func newSetupCode() -> SecretBytes { AutocryptSetup.newSetupCode() }

    /// The Setup Message's description, as Level 1 suggests.
    static let description = """
        This message contains all information to transfer your Autocrypt settings along with your secret key \
        securely from your original device.

        To set up your new device for Autocrypt, please follow the instructions that should be presented by your \
        new device.

        You can keep this message and use it as a backup for your secret key. If you want to do this, you should \
        write down the Setup Code and store it securely.
        """

    /// The Setup Message of the default key, encrypted under `code`; with `send`, also queued to the user's own
    /// address and sent through the account's submission server.
    ///
    /// - Returns: The message (RFC 5322, CRLF).
    /// - Throws: `StoreError.openPGPKeyNotFound` without a key; `OpenPGPError.invalidArgument` for a code that is
    ///   not nine blocks of four digits; `StoreError` (`locked`), the outbox's errors with `send`.
    public func setupMessage(code: SecretBytes, send: Bool) async throws -> String {
        defer { code.wipe() }
        let store = try dependencies.mailStore
        guard let mine = try await store.openPGPKeys().first(where: \.isDefault) else {
            throw StoreError.openPGPKeyNotFound
        }
        // The account's sending address; written without sending, an account with no server uses the key's address.
        let from: MailAddress
        var server: Int64?
        if send {
            let chosen = try await AccountCoordinator.serverAccount(nil, in: store)
            server = chosen.id
            from = try await WritingHandler.sendingAddress(chosen.id, in: store)
        } else if let chosen = try? await AccountCoordinator.serverAccount(nil, in: store),
            let address = try? await WritingHandler.sendingAddress(chosen.id, in: store)
        {
            from = address
        } else if let address = OpenPGPKeyHandler.addresses(of: mine.userIDs).first {
            from = MailAddress(name: nil, address: address.address)
        } else {
            throw AgentFailure(.badRequest, "The account has no sending address and the key no email address.")
        }
        let mutual = try await store.autocryptPreferEncryptMutual()
        let secret = try await store.openPGPSecretKey(fingerprint: mine.fingerprint)
        let payload = try await RNPDiagnostics.run { () throws(OpenPGPError) -> [UInt8] in
            let key = try OpenPGPSecretKey(bytes: secret)
            return try AutocryptSetup.seal(key, preferEncryptMutual: mutual, setupCode: code)
        }
        let html =
            "<html><head><title>Autocrypt Setup Message</title></head><body>\r\n"
            + "<h1>Autocrypt Setup Message</h1>\r\n<p>This is the Autocrypt setup file used to transfer your secret "
            + "key between clients. Open it with your mail program and type the Setup Code it asks for.</p>\r\n<pre>\r\n"
            + String(decoding: payload, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
            .replacingOccurrences(of: "\n", with: "\r\n") + "</pre></body></html>\r\n"
        let message = OutgoingMessage(
            from: from,
            to: [MailAddress(name: nil, address: from.address)],
            subject: "Autocrypt Setup Message",
            extraHeaders: [OutgoingHeader(name: "Autocrypt-Setup-Message", value: "v1")],
            text: Self.description,
            attachments: [
                OutgoingAttachment(
                    filename: "autocrypt-setup-message.html",
                    contentType: "application/autocrypt-setup",
                    bytes: Array(html.utf8)
                )
            ]
        )
        let written = try MessageWriter.bytes(of: message).bytes
        if let server { _ = try await dependencies.coordinator.send(message, server: server, replacingDraft: nil) }
        return String(decoding: written, as: UTF8.self)
    }

    /// Imports the secret key of stored message `id`, a Setup Message, with `code`: its `application/autocrypt-setup`
    /// attachment is decrypted, the key stored sealed as `coffer key import` stores one, and the account's
    /// prefer-encrypt set from the key's `Autocrypt-Prefer-Encrypt` header.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) for a message that is not a Setup Message, (`failed`) for a wrong
    ///   Setup Code or a changed message; `StoreError.openPGPKeyExists` when the key is stored already.
    public func importSetupMessage(_ id: Int64, code: SecretBytes) async throws -> [OpenPGPKeyInfo] {
        defer { code.wipe() }
        let store = try dependencies.mailStore
        let detail = try await store.message(id)
        guard
            let part = detail.attachments.first(where: { $0.contentType.lowercased() == "application/autocrypt-setup" })
        else {
            throw AgentFailure(
                .badRequest,
                "Message \(id) is not an Autocrypt Setup Message (it has no application/autocrypt-setup part)."
            )
        }
        let content = try await store.attachmentContent(part.id).content
        let begin = Array("-----BEGIN PGP MESSAGE-----".utf8)
        let end = Array("-----END PGP MESSAGE-----".utf8)
        guard let start = content.firstRange(of: begin), let stop = content[start.lowerBound...].firstRange(of: end)
        else { throw AgentFailure(.badRequest, "Message \(id) holds no encrypted Autocrypt setup data.") }
        let payload = Array(content[start.lowerBound..<stop.upperBound])
        let stored = Set(try await store.openPGPKeys().map(\.fingerprint))
        let result = await RNPDiagnostics.run { () -> Result<([OpenPGPKeyImport], Bool?), OpenPGPError> in
            do throws(OpenPGPError) {
                let result = try AutocryptSetup.open(payload, setupCode: code)
                defer { result.keys.wipe() }
                return .success((try OpenPGP.importKeys(from: result.keys), result.preferEncryptMutual))
            } catch {
                return .failure(error)
            }
        }
        let opened: (keys: [OpenPGPKeyImport], mutual: Bool?)
        switch result {
        case .success(let value): opened = value
        case .failure(.wrongPassphrase):
            throw AgentFailure(.failed, "The Setup Code is wrong: the key was not imported. Nothing was stored.")
        case .failure(.integrityFailure):
            throw AgentFailure(
                .failed,
                "The Setup Message was changed (its integrity check failed). Nothing was stored."
            )
        case .failure(let error): throw error
        }
        let secrets = opened.keys.compactMap(\.secretKey)
        guard !secrets.isEmpty else {
            throw AgentFailure(.failed, "The Setup Message holds no usable secret key. Nothing was stored.")
        }
        guard secrets.allSatisfy({ !stored.contains($0.fingerprint) }) else { throw StoreError.openPGPKeyExists }
        let added = try await OpenPGPKeyHandler.storeSecretKeys(secrets, in: store)
        if let mutual = opened.mutual { try await store.setAutocryptPreferEncrypt(mutual: mutual) }
        return added
    }
}
