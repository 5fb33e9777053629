import CofferCrypto
import Crypto
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The Linux keychain: a 0700 folder with one sealed 0600 file per item.
///
/// File names are SHA-256 hashes of the address, so the folder does not reveal services or accounts. Each file is
/// `"CFKC" | 0x01 | accessibility | envelope`, the envelope sealed under a key derived from the device secret (and,
/// for `…ThisDeviceOnly` items, the machine id), with the file name and accessibility as its context. Writes are
/// atomic (temporary file, fsync, rename, fsync folder) and serialised across processes with `flock`.
/// `docs/FORMAT.md` has the byte layout.
public final class FileKeychain: Keychain {
    static let magic: [UInt8] = [0x43, 0x46, 0x4B, 0x43]
    let folder: String
    private let portableKey: EnvelopeKey
    private let deviceOnlyKey: EnvelopeKey
    private let state: any DeviceState
    private let crashPoint: SecureFile.CrashPoint?
    private let lock = NIOLock()
    /// What opening each item file showed, by file name, with the identity of the file it was read from: a write
    /// replaces a file (a new inode), so an item file whose identity is unchanged holds the same item.
    private let opened = NIOLockedValueBox<[String: OpenedItem]>([:])

    /// The address and class of an item file, as of the file with `identity`. Names, not the value.
    private struct OpenedItem {
        var identity: FileIdentity
        var address: KeychainAddress
        var accessibility: KeychainAccessibility
    }

    /// What tells one file from another at the same path: device, inode, size, and the change and modification times.
    private struct FileIdentity: Equatable {
        var device: UInt
        var inode: UInt
        var size: Int
        var modified: timespec
        var changed: timespec

        init(_ info: stat) {
            (device, inode, size) = (UInt(info.st_dev), UInt(info.st_ino), Int(info.st_size))
            (modified, changed) = (info.st_mtim, info.st_ctim)
        }

        static func == (a: FileIdentity, b: FileIdentity) -> Bool {
            (a.device, a.inode, a.size) == (b.device, b.inode, b.size)
                && (a.modified.tv_sec, a.modified.tv_nsec, a.changed.tv_sec, a.changed.tv_nsec)
                    == (b.modified.tv_sec, b.modified.tv_nsec, b.changed.tv_sec, b.changed.tv_nsec)
        }
    }

    /// Opens (creating if needed) the keychain in `folder`.
    ///
    /// Temporary files that a crashed writer left behind are deleted; a write in progress in another process is
    /// left alone (see ``SecureFile/removeTemporaryLeftovers(in:)``).
    ///
    /// - Parameters:
    ///   - folder: The keychain folder; created with mode 0700.
    ///   - device: The device identity whose secret seals the items; keep its file outside `folder`.
    ///   - state: The device state that gates accessibility classes.
    /// - Throws: ``KeychainError/storage(_:)``, with `CofferCryptoError.notPrivate` if the folder exists but belongs
    ///   to another user or is open to others.
    public convenience init(
        folder: String,
        device: DeviceIdentity,
        state: any DeviceState = SystemDeviceState()
    )
        throws(KeychainError)
    {
        try self.init(folder: folder, device: device, state: state, crashPoint: nil)
    }

    /// Opens the keychain with a hook that tests use to stop or pause item writes between their steps.
    package init(
        folder: String,
        device: DeviceIdentity,
        state: any DeviceState = SystemDeviceState(),
        crashPoint: SecureFile.CrashPoint?
    )
        throws(KeychainError)
    {
        self.folder = folder
        self.portableKey = device.itemKey(thisDeviceOnly: false)
        self.deviceOnlyKey = device.itemKey(thisDeviceOnly: true)
        self.state = state
        self.crashPoint = crashPoint
        do {
            try SecureFile.makePrivateDirectory(folder)
            try SecureFile.removeTemporaryLeftovers(in: folder)
        } catch {
            throw .storage(error)
        }
    }

    /// Whether `folder` holds any keychain item files, without opening, creating or changing anything; `false` if
    /// the folder does not exist.
    public static func hasItems(in folder: String) throws(KeychainError) -> Bool {
        do { return try SecureFile.list(folder).contains { $0.hasSuffix(".item") } } catch { throw .storage(error) }
    }

    /// See ``Keychain/add(_:at:accessibility:)``.
    public func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        try accessibility.check(state)
        try exclusively { () throws(KeychainError) in
            guard !SecureFile.exists(path(for: address)) else { throw .duplicateItem }
            try write(value, at: address, accessibility: accessibility)
        }
    }

    /// See ``Keychain/update(_:at:)``.
    public func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        try exclusively { () throws(KeychainError) in
            let (accessibility, _) = try open(address)
            try write(value, at: address, accessibility: accessibility)
        }
    }

    /// See ``Keychain/read(_:)``.
    public func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes {
        try exclusively { () throws(KeychainError) in try open(address).1 }
    }

    /// See ``Keychain/delete(_:)``.
    public func delete(_ address: KeychainAddress) throws(KeychainError) {
        try exclusively { () throws(KeychainError) in
            try storage { () throws(CofferCryptoError) in try SecureFile.remove(path(for: address)) }
        }
    }

    /// See ``Keychain/addresses(accessGroup:service:)``.
    ///
    /// - Throws: ``KeychainError/deviceMismatch`` if any item was sealed under another device secret or machine id:
    ///   the folder belongs to another device, and listing only what opens would read as "no such items". Damaged
    ///   items (``KeychainError/corruptItem``) are skipped, so that one bad file does not hide the others.
    public func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        var found: [KeychainAddress] = []
        for name in try names() {
            let item: OpenedItem?
            do {
                item = try openedItem(fileName: name)
            } catch .deviceMismatch {
                throw .deviceMismatch
            } catch .storage(let error) {
                throw .storage(error)
            } catch {
                continue
            }
            guard let address = item?.address, address.accessGroup == accessGroup, address.service == service else {
                continue
            }
            found.append(address)
        }
        return found.sorted { $0.account < $1.account }
    }

    /// See ``Keychain/contains(_:)``. An item file seen before and unchanged since (the same inode, size and times)
    /// is not opened again: the agent asks this on every request. Only names and classes are remembered; every use
    /// of an item's value reads and opens its file.
    public func contains(_ address: KeychainAddress) throws(KeychainError) -> Bool {
        guard let item = try openedItem(fileName: fileName(for: address)) else { return false }
        guard item.address == address else { throw .corruptItem }
        // The passcode went away: reading deletes the item, as on iOS.
        if item.accessibility == .whenPasscodeSetThisDeviceOnly && !state.isPasscodeSet {
            return try readIfPresent(address) != nil
        }
        try item.accessibility.check(state)
        return true
    }

    /// The address and class of the item file `name`, opened unless this keychain opened the same file before;
    /// `nil` when there is no such file. The identity is taken before the file is read, so a file replaced between
    /// the two is opened again next time.
    private func openedItem(fileName name: String) throws(KeychainError) -> OpenedItem? {
        var info = stat()
        guard lstat("\(folder)/\(name)", &info) == 0 else {
            guard errno == ENOENT else { throw .storage(.io(operation: "inspect a keychain item", errno: errno)) }
            _ = opened.withLockedValue { $0.removeValue(forKey: name) }
            return nil
        }
        let identity = FileIdentity(info)
        if let known = opened.withLockedValue({ $0[name] }), known.identity == identity { return known }
        let address: KeychainAddress
        let accessibility: KeychainAccessibility
        do {
            (address, accessibility, _) = try decode(fileName: name)
        } catch .itemNotFound {
            return nil
        }
        let item = OpenedItem(identity: identity, address: address, accessibility: accessibility)
        opened.withLockedValue { $0[name] = item }
        return item
    }

    /// See ``Keychain/passcodeRemoved()``.
    public func passcodeRemoved() throws(KeychainError) {
        try exclusively { () throws(KeychainError) in
            for name in try names() {
                let path = "\(folder)/\(name)"
                let bytes = try storage { () throws(CofferCryptoError) in try SecureFile.read(path) }
                guard let bytes, bytes.count > 6,
                    bytes[5] == KeychainAccessibility.whenPasscodeSetThisDeviceOnly.rawValue
                else { continue }
                try storage { () throws(CofferCryptoError) in try SecureFile.remove(path) }
            }
        }
    }

    // MARK: - Files

    private func names() throws(KeychainError) -> [String] {
        try storage { () throws(CofferCryptoError) in try SecureFile.list(folder).filter { $0.hasSuffix(".item") } }
    }

    package func fileName(for address: KeychainAddress) -> String {
        var hasher = SHA256()
        for part in [address.accessGroup, address.service, address.account] {
            var length: [UInt8] = []
            length.append(contentsOf: withUnsafeBytes(of: UInt32(part.utf8.count).bigEndian) { Array($0) })
            hasher.update(data: length + Array(part.utf8))
        }
        return Array(hasher.finalize()).hexString + ".item"
    }

    private func path(for address: KeychainAddress) -> String { "\(folder)/\(fileName(for: address))" }

    private func context(fileName: String, accessibility: KeychainAccessibility) -> EnvelopeContext {
        ["coffer.keychain.item.v1", fileName, String(accessibility.rawValue)]
    }

    private func key(for accessibility: KeychainAccessibility) -> EnvelopeKey {
        accessibility.isThisDeviceOnly ? deviceOnlyKey : portableKey
    }

    private func write(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        let file = try itemFile(value, at: address, accessibility: accessibility, nonce: nil)
        try storage { () throws(CofferCryptoError) in
            try SecureFile.writeAtomically(file.bytes, to: "\(folder)/\(file.name)", crashPoint: crashPoint)
        }
    }

    /// The file name and bytes of an item, sealed with a random nonce, or with `nonce` for known-answer tests.
    package func itemFile(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility,
        nonce: [UInt8]?
    ) throws(KeychainError) -> (name: String, bytes: [UInt8]) {
        let name = fileName(for: address)
        var plaintext: [UInt8] = []
        for part in [address.accessGroup, address.service, address.account] {
            plaintext.append(contentsOf: withUnsafeBytes(of: UInt32(part.utf8.count).bigEndian) { Array($0) })
            plaintext += Array(part.utf8)
        }
        value.withUnsafeBytes { plaintext += $0 }
        defer { for index in plaintext.indices { plaintext[index] = 0 } }
        let envelope = try storage { () throws(CofferCryptoError) in
            let key = key(for: accessibility)
            let context = context(fileName: name, accessibility: accessibility)
            guard let nonce else { return try Envelope.seal(plaintext, with: key, context: context) }
            let result = plaintext.withUnsafeBytes { raw in
                Result { () throws(CofferCryptoError) in
                    try Envelope.seal(raw, with: key, context: context, algorithm: .aes256GCM, nonce: nonce)
                }
            }
            return try result.get()
        }
        return (name, Self.magic + [1, accessibility.rawValue] + envelope)
    }

    private func open(_ address: KeychainAddress) throws(KeychainError) -> (KeychainAccessibility, SecretBytes) {
        let name = fileName(for: address)
        let (stored, accessibility, value) = try decode(fileName: name)
        guard stored == address else { throw .corruptItem }
        if accessibility == .whenPasscodeSetThisDeviceOnly && !state.isPasscodeSet {
            // The passcode went away while this item existed: it is deleted, as on iOS.
            try storage { () throws(CofferCryptoError) in try SecureFile.remove("\(folder)/\(name)") }
            throw .itemNotFound
        }
        try accessibility.check(state)
        return (accessibility, value)
    }

    private func decode(
        fileName name: String
    ) throws(KeychainError) -> (
        KeychainAddress, KeychainAccessibility, SecretBytes
    ) {
        let path = "\(folder)/\(name)"
        guard let bytes = try storage({ () throws(CofferCryptoError) in try SecureFile.read(path) }) else {
            throw .itemNotFound
        }
        guard bytes.count > 6, Array(bytes[0..<4]) == Self.magic, bytes[4] == 1,
            let accessibility = KeychainAccessibility(rawValue: bytes[5])
        else { throw .corruptItem }
        let plaintext: SecretBytes
        do {
            plaintext = try Envelope.openSecret(
                Array(bytes[6...]),
                with: key(for: accessibility),
                context: context(fileName: name, accessibility: accessibility)
            )
        } catch .wrongKey {
            throw .deviceMismatch
        } catch {
            throw .corruptItem
        }
        return try plaintext.withUnsafeBytes { (raw) throws(KeychainError) in
            var offset = 0
            var parts: [String] = []
            for _ in 0..<3 {
                guard raw.count - offset >= 4 else { throw .corruptItem }
                let length = raw[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                offset += 4
                guard raw.count - offset >= length else { throw .corruptItem }
                parts.append(String(decoding: raw[offset..<offset + length], as: UTF8.self))
                offset += length
            }
            let address = KeychainAddress(accessGroup: parts[0], service: parts[1], account: parts[2])
            return (address, accessibility, SecretBytes(copying: raw[offset...]))
        }
    }

    private func storage<R>(_ body: () throws(CofferCryptoError) -> R) throws(KeychainError) -> R {
        do { return try body() } catch { throw .storage(error) }
    }

    /// Runs `body` holding both the in-process mutex and an exclusive `flock` on the folder's lock file.
    private func exclusively<R>(_ body: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        lock.lock()
        defer { lock.unlock() }
        let fd = Glibc.open("\(folder)/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage(.io(operation: "open the keychain lock", errno: errno)) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .storage(.io(operation: "lock the keychain", errno: errno)) }
        }
        return try body()
    }
}
