import CofferCrypto
import CofferKeymaker
import Crypto

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A keyed hash (HMAC-SHA256) under a key derived from the MainKey, prepared once so each hash only runs the
/// inner and outer compressions of the message.
struct KeyedHasher: Sendable {
    private let prepared: HMAC<SHA256>

    /// Prepares the hash key ``MainKey/hashKey(_:)`` for `label`.
    init(mainKey: MainKey, label: String) throws(KeymakerError) {
        prepared = HMAC<SHA256>(key: try mainKey.hashKey(label))
    }

    /// The full 32-byte keyed hash of `bytes` with a one-byte domain `tag`.
    func hash(tag: UInt8, _ bytes: some DataProtocol) -> [UInt8] {
        var hmac = prepared
        withUnsafeBytes(of: tag) { hmac.update(data: $0) }
        hmac.update(data: bytes)
        return Array(hmac.finalize())
    }

    /// A keyed hash with domain `tag` to feed incrementally (`update`, then `finalize`): the same value as
    /// ``hash(tag:_:)`` of all the bytes fed, for data that is never whole in memory.
    func start(tag: UInt8) -> HMAC<SHA256> {
        var hmac = prepared
        withUnsafeBytes(of: tag) { hmac.update(data: $0) }
        return hmac
    }

    /// The first 8 bytes of ``hash(tag:_:)`` as a signed big-endian integer (the blind-index token format).
    func hash64(tag: UInt8, _ bytes: some DataProtocol) -> Int64 {
        var hmac = prepared
        withUnsafeBytes(of: tag) { hmac.update(data: $0) }
        hmac.update(data: bytes)
        return hmac.finalize().withUnsafeBytes { raw in
            var value: UInt64 = 0
            for index in 0..<8 { value = value << 8 | UInt64(raw[index]) }
            return Int64(bitPattern: value)
        }
    }
}

/// The column of a sealed cell: its table and column name, which are also its subkey label and part of its
/// context.
enum SealedColumn: String, CaseIterable, Sendable {
    case messageSubject = "messages.subject"
    case messageFrom = "messages.fromList"
    case messageTo = "messages.toList"
    case messageCc = "messages.ccList"
    case messageBcc = "messages.bccList"
    case messageHeaders = "messages.headers"
    case messageText = "messages.textBody"
    case messageHTML = "messages.htmlBody"
    case messageSnippet = "messages.snippet"
    /// What a list row shows (subject and senders) in one cell (migration `v3-summary`).
    case messageSummary = "messages.summary"
    /// What the store found of OpenPGP on the message (migration `v8-openpgp-mail`).
    case messageOpenPGP = "messages.openPGP"
    case attachmentInfo = "attachments.info"
    case attachmentBody = "attachments.body"
    case accountDetails = "accounts.details"
    case addressDetails = "addresses.details"
    case contactDetails = "contacts.details"
    case labelName = "labels.name"
    case settingValue = "settings.value"
    case serverConfig = "accountServers.config"
    case syncFolderName = "syncFolders.name"
    /// A draft: draft record v1 (migration `v5-outbox`).
    case draftRecord = "drafts.record"
    /// A draft attachment's metadata: draft attachment record v1.
    case draftAttachmentInfo = "draftAttachments.info"
    /// An address-book entry: contact record v1.
    case contactRecord = "addressBook.record"
    /// An outbox item: outbox item record v1.
    case outboxRecord = "outbox.record"
    /// An outbox item's last failure: one string.
    case outboxError = "outbox.lastError"
    /// One of the user's OpenPGP keys: OpenPGP key record v1 (migration `v7-openpgp-keys`).
    case openPGPKeyRecord = "openPGPKeys.record"
    /// The unprotected secret key of one of the user's OpenPGP keys: OpenPGP secret key record v1.
    case openPGPSecretKey = "openPGPKeys.secretKey"
    /// A correspondent's OpenPGP certificate: contact key record v1 (migration `v9-contact-keys`).
    case contactKeyRecord = "contactKeys.record"
    /// A correspondent's Autocrypt peer state: Autocrypt peer record v1 (migration `v10-autocrypt-peers`).
    case autocryptPeerRecord = "autocryptPeers.record"

    var table: Substring { rawValue.split(separator: ".")[0] }
    var column: Substring { rawValue.split(separator: ".")[1] }
}

/// Domain tags of the keyed hashes, so one hash key serves several purposes without collisions between them.
enum HashTag {
    static let searchToken: UInt8 = 0x01
    static let messageID: UInt8 = 0x02
    static let content: UInt8 = 0x03
    static let labelName: UInt8 = 0x04
    static let contactAddress: UInt8 = 0x05
    static let ownAddress: UInt8 = 0x06
    static let syncFolderName: UInt8 = 0x07
    /// Under the search key: a prefix of a word of an address-book entry's name or address.
    static let contactPrefix: UInt8 = 0x08
    /// Under the lookup key: an address-book entry's canonical address.
    static let contactCanonical: UInt8 = 0x09
    /// Under the lookup key: an OpenPGP key's fingerprint (upper-case hex).
    static let openPGPFingerprint: UInt8 = 0x0A
}

/// The sealed files beside the store (draft attachments, outbox messages and large attachments of stored messages,
/// `docs/STORE.md`, "Outgoing files"):
/// each kind has its own streaming key, a MainKey subkey.
enum SealedFileKind: String, CaseIterable, Sendable {
    /// A draft attachment's bytes (`store.draftAttachments.file`).
    case draftAttachment = "draftAttachments.file"
    /// An outbox message's RFC 5322 bytes (`store.outbox.message`).
    case outboxMessage = "outbox.message"
    /// A stored message's large attachment body, decoded (`store.attachments.file`, migration `v6-attachment-files`).
    case attachmentFile = "attachments.file"

    /// The file name extension of this kind.
    var fileExtension: String {
        switch self {
        case .draftAttachment: ".cfd"
        case .outboxMessage: ".cfo"
        case .attachmentFile: ".cfb"
        }
    }

    /// The stream's context: `["store", table, column, file name]`.
    func context(file: String) -> EnvelopeContext {
        let parts = rawValue.split(separator: ".")
        return EnvelopeContext(["store", String(parts[0]), String(parts[1]), file])
    }
}

/// Every key the store uses, derived once per MainKey (per unlock), never per cell.
final class StoreKeys: Sendable {
    /// One column's key and the encoded start of its cells' contexts.
    private struct Slot: Sendable {
        let key: EnvelopeKey
        let prefix: EnvelopeContext
    }

    private let slots: [SealedColumn: Slot]
    /// The streaming keys of the sealed files beside the store.
    private let fileKeys: [SealedFileKind: EnvelopeKey]
    /// The sealing step of every cell (``EnvelopeCellCipher`` except in the benchmark).
    private let cipher: any CellCipher
    /// The blind-index key (`store.search`).
    let search: KeyedHasher
    /// The keyed hashes that find duplicates and look records up (`store.lookup`).
    let lookup: KeyedHasher

    init(mainKey: MainKey, cipher: any CellCipher = EnvelopeCellCipher()) throws(StoreError) {
        self.cipher = cipher
        var slots: [SealedColumn: Slot] = [:]
        var fileKeys: [SealedFileKind: EnvelopeKey] = [:]
        do {
            for kind in SealedFileKind.allCases { fileKeys[kind] = try mainKey.subkey("store.\(kind.rawValue)") }
            for column in SealedColumn.allCases {
                slots[column] = Slot(
                    key: try mainKey.subkey("store.\(column.rawValue)"),
                    prefix: EnvelopeContext(["store", String(column.table), String(column.column)])
                )
            }
            search = try KeyedHasher(mainKey: mainKey, label: "store.search")
            lookup = try KeyedHasher(mainKey: mainKey, label: "store.lookup")
        } catch {
            throw error == .locked ? .locked : .keymaker(error)
        }
        guard !mainKey.isWiped else { throw .locked }
        self.slots = slots
        self.fileKeys = fileKeys
    }

    /// The streaming key of one kind of sealed file.
    func fileKey(_ kind: SealedFileKind) -> EnvelopeKey { fileKeys[kind]! }

    /// The context of one cell: `["store", table, column, row id]` plus any `extra` part (an attachment's message
    /// id, an address's account id, a setting's name).
    static func context(_ column: SealedColumn, row: Int64, extra: String? = nil) -> EnvelopeContext {
        var parts = ["store", String(column.table), String(column.column), String(row)]
        if let extra { parts.append(extra) }
        return EnvelopeContext(parts)
    }

    private func context(_ slot: Slot, row: Int64, extra: String?) -> EnvelopeContext {
        if let extra { return slot.prefix.appending(String(row), extra) }
        return slot.prefix.appending(String(row))
    }

    /// Seals a cell's plaintext for its column and row.
    func seal(
        _ plaintext: [UInt8],
        _ column: SealedColumn,
        row: Int64,
        extra: String? = nil
    ) throws(StoreError)
        -> Data
    {
        let slot = slots[column]!
        do {
            return Data(try cipher.seal(plaintext, with: slot.key, context: context(slot, row: row, extra: extra)))
        } catch {
            throw .crypto(error)
        }
    }

    /// Opens a cell and decodes it with `decode`, then zeroes the decrypted buffer (and the reader's unpadded copy
    /// is the reader's own); `nil` when the cell fails to open or to decode. The values `decode` returns (Strings)
    /// cannot be zeroed: see `docs/THREAT-MODEL.md`, "Decrypted mail in memory".
    func decode<T>(
        _ sealed: Data?,
        _ column: SealedColumn,
        row: Int64,
        extra: String? = nil,
        _ decode: ([UInt8]) throws -> T
    ) -> T? {
        guard var plain = open(sealed, column, row: row, extra: extra) else { return nil }
        defer { Self.zero(&plain) }
        return try? decode(plain)
    }

    /// Overwrites a decrypted buffer with zeros (`explicit_bzero`, which the compiler keeps).
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }

    /// Opens a cell; `nil` when it fails for any reason (changed, moved, wrong key, damaged).
    func open(_ sealed: Data?, _ column: SealedColumn, row: Int64, extra: String? = nil) -> [UInt8]? {
        guard let sealed else { return nil }
        let slot = slots[column]!
        return cipher.open(Array(sealed), with: slot.key, context: context(slot, row: row, extra: extra))
    }
}
