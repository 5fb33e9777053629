import CofferCrypto
import CofferNotify
import Crypto
import Foundation
import Testing

/// Issue 23: the service's master key travels as `SecretBytes` from `master.key` to the `SymmetricKey`s derived from
/// it, and nothing that holds it or its derived keys shows a key byte in `String(describing:)`, `String(reflecting:)`
/// or `dump`.
@Suite struct MasterKeyRedactionTests {
    /// A master key whose bytes are easy to tell apart: 0xA0 to 0xBF.
    static let master = (0..<32).map { UInt8(0xA0 + $0) }

    /// The keys derived from `master` (docs/FORMAT.md: "Sealed push keys v1", "FastSync escrow v1").
    static var derived: [[UInt8]] {
        let key = SymmetricKey(data: master)
        let sealer = ["coffer-notify push keys seal v1", "coffer-notify push key id v1"].map { info in
            HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array(info.utf8), outputByteCount: 32)
        }
        let escrow = ["user-key", "kek"].map { info in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: key,
                salt: Data("coffer-notify.escrow.v1".utf8),
                info: Data(info.utf8),
                outputByteCount: 32
            )
        }
        return (sealer + escrow).map { $0.withUnsafeBytes { Array($0) } }
    }

    /// Whether `text` shows 4 consecutive bytes of `key`: as decimal numbers (an array's description or dump), as
    /// hex, or as base64 or base64url.
    static func shows(_ text: String, _ key: [UInt8]) -> Bool {
        let numbers = text.split { !$0.isNumber }.compactMap { UInt8($0) }
        let lower = text.lowercased()
        for start in 0...(key.count - 4) {
            let window = Array(key[start..<start + 4])
            if numbers.count >= 4, (0...(numbers.count - 4)).contains(where: { Array(numbers[$0..<$0 + 4]) == window })
            {
                return true
            }
            if lower.contains(window.map { String(format: "%02x", $0) }.joined()) { return true }
        }
        let base64 = Data(key).base64EncodedString()
        let base64URL = base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return text.contains(base64.prefix(8)) || text.contains(base64URL.prefix(8))
    }

    static func texts(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), dumped]
    }

    @Test func theCheckFindsKeyBytesWhereTheyAre() {
        var dumped = ""
        dump(Self.master, to: &dumped)
        #expect(Self.shows(dumped, Self.master))
        #expect(Self.shows(String(describing: Self.derived[0]), Self.derived[0]))
        #expect(Self.shows(Data(Self.derived[1]).base64EncodedString(), Self.derived[1]))
    }

    @Test func nothingThatHoldsTheMasterKeyShowsIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = SecretBytes(copying: Self.master)
        let sealer = try SessionKeySealer(masterKey: key)
        let storage = try SQLiteNotifyStorage(path: folder.appendingPathComponent("notify.sqlite").path, masterKey: key)
        let records = try SQLiteEscrowRecords(path: folder.appendingPathComponent("escrow.sqlite").path)
        let escrow = try FastSyncEscrow(records: records, masterKey: key)
        var service = NotifyService(
            storage: storage,
            authenticator: FakeAuthenticator(passwords: [:]),
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret)
        )
        service.escrow = escrow
        let holders: [(String, Any)] = [
            ("master key", key), ("sealer", sealer), ("storage", storage), ("escrow", escrow), ("service", service),
        ]
        for (name, holder) in holders {
            for text in Self.texts(holder) {
                for secret in [Self.master] + Self.derived {
                    #expect(!Self.shows(text, secret), "\(name): \(text.prefix(2000))")
                }
            }
        }
        #expect(String(describing: sealer) == "SessionKeySealer(<redacted>)")
        #expect(String(describing: escrow) == "FastSyncEscrow(<redacted>)")
        // The key still works after all that: the sealer opens what it sealed.
        let record = try sealer.seal(
            publicKey: Array(repeating: 4, count: 65),
            authSecret: Array(repeating: 7, count: 16),
            sessionID: "s"
        )
        #expect(try sealer.open(record, sessionID: "s").authSecret == Array(repeating: 7, count: 16))
    }

    @Test func theHomesMasterKeyIsSecretBytesAndAWipedKeyIsRefused() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.path)
        let key = try home.masterKey()
        let bytes = key.withUnsafeBytes { Array($0) }
        for text in Self.texts(key) { #expect(!Self.shows(text, bytes), "\(text)") }
        key.wipe()
        #expect(throws: NotifyError.configuration("the master key must be 32 bytes")) {
            try SessionKeySealer(masterKey: key)
        }
    }
}
