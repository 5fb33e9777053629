import CofferCrypto
import CofferKeychain
import CofferTesting
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite struct FileKeychainTests {
    let address = KeychainAddress(service: "coffer.mainkey.none", account: "alice@example.com")

    struct Home {
        let root = TemporaryDirectory()
        var keychain: String { "\(root.path)/data/keychain" }
        var secret: String { "\(root.path)/state/device-secret" }
        var machine: String { "\(root.path)/machine-id" }

        /// Loads the device secret, creating it on first set-up, with `machineID` as the machine id.
        func device(machineID: String = "machine-A") throws -> DeviceIdentity {
            try SecureFile.makePrivateDirectory(root.path)
            try SecureFile.writeAtomically(Array("\(machineID)\n".utf8), to: machine)
            return try DeviceIdentity.loadOrCreate(
                secretPath: secret,
                keychainFolder: keychain,
                machineIDPaths: [machine]
            )
        }

        /// Loads the device secret as every command but set-up does: never creating it.
        func loadOnly(machineID: String = "machine-A") throws -> DeviceIdentity {
            try SecureFile.writeAtomically(Array("\(machineID)\n".utf8), to: machine)
            return try DeviceIdentity.load(secretPath: secret, machineIDPaths: [machine])
        }
    }

    @Test func filesArePrivateAndRevealNothing() throws {
        let home = Home()
        let keychain = try FileKeychain(folder: home.keychain, device: home.device())
        let marker = Array("CANARY-KEYCHAIN-VALUE".utf8)
        try keychain.add(SecretBytes(copying: marker), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        var info = stat()
        stat(home.keychain, &info)
        #expect(info.st_mode & 0o777 == 0o700)
        let files = try SecureFile.list(home.keychain).filter { $0.hasSuffix(".item") }
        #expect(files.count == 1)
        stat("\(home.keychain)/\(files[0])", &info)
        #expect(info.st_mode & 0o777 == 0o600)
        stat(home.secret, &info)
        #expect(info.st_mode & 0o777 == 0o600)
        let needles = [marker, Array("alice@example.com".utf8), Array("coffer.mainkey".utf8)]
        #expect(CanaryScanner.occurrences(of: needles, under: [home.root.path]).isEmpty)
    }

    /// `contains` remembers what it opened only for as long as the file is the same: an item deleted, written
    /// again, or replaced by another item's file by another process is seen at the next call.
    @Test func containsSeesWhatAnotherProcessChanged() throws {
        let home = Home()
        let device = try home.device()
        let ours = try FileKeychain(folder: home.keychain, device: device)
        let theirs = try FileKeychain(folder: home.keychain, device: device)
        let other = KeychainAddress(service: "coffer.mainkey.none", account: "bob@example.com")
        try ours.add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlock)
        try ours.add(SecretBytes(copying: [2]), at: other, accessibility: .afterFirstUnlock)
        #expect(try ours.contains(address))
        try theirs.delete(address)
        #expect(try !ours.contains(address))
        #expect(try ours.addresses(accessGroup: "coffer", service: "coffer.mainkey.none") == [other])
        try theirs.add(SecretBytes(copying: [3]), at: address, accessibility: .afterFirstUnlock)
        #expect(try ours.contains(address))
        #expect(try ours.addresses(accessGroup: "coffer", service: "coffer.mainkey.none") == [address, other])

        // Bob's item file copied over Alice's, once as a new file and once written in place: not Alice's item.
        let path = { (address: KeychainAddress) in "\(home.keychain)/\(ours.fileName(for: address))" }
        let bobs = try #require(try SecureFile.read(path(other)))
        try SecureFile.writeAtomically(bobs, to: path(address))
        #expect(throws: KeychainError.corruptItem) { try ours.contains(address) }
        try theirs.delete(address)
        try theirs.add(SecretBytes(copying: [4]), at: address, accessibility: .afterFirstUnlock)
        #expect(try ours.contains(address))
        let file = try #require(FileHandle(forWritingAtPath: path(address)))
        try file.truncate(atOffset: 0)
        try file.write(contentsOf: Data(bobs))
        try file.close()
        #expect(throws: KeychainError.corruptItem) { try ours.contains(address) }
    }

    @Test func itemsSurviveReopeningWithTheSameDevice() throws {
        let home = Home()
        try FileKeychain(folder: home.keychain, device: home.device())
            .add(SecretBytes(copying: [1, 2]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        let reopened = try FileKeychain(folder: home.keychain, device: home.device())
        #expect(try reopened.read(address) == SecretBytes(copying: [1, 2]))
    }

    @Test func copyToAnotherMachineIsADeviceMismatch() throws {
        let home = Home()
        let portable = KeychainAddress(service: "coffer.portable", account: "a")
        let keychain = try FileKeychain(folder: home.keychain, device: home.device(machineID: "machine-A"))
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.add(SecretBytes(copying: [2]), at: portable, accessibility: .afterFirstUnlock)
        // Same folders and device secret, another machine id: ThisDeviceOnly items refuse, portable ones open.
        let elsewhere = try FileKeychain(folder: home.keychain, device: home.device(machineID: "machine-B"))
        #expect(throws: KeychainError.deviceMismatch) { try elsewhere.read(address) }
        #expect(try elsewhere.read(portable) == SecretBytes(copying: [2]))
    }

    @Test func aMissingDeviceSecretIsNeverRegeneratedOverItems() throws {
        let home = Home()
        try FileKeychain(folder: home.keychain, device: home.device())
            .add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlock)
        try SecureFile.remove(home.secret)
        // Neither an ordinary load nor first set-up makes a new secret over a keychain sealed with the lost one.
        #expect(throws: KeychainError.deviceSecretMissing) { try home.loadOnly() }
        #expect(throws: KeychainError.deviceSecretMissing) { try home.device() }
        #expect(!SecureFile.exists(home.secret))
    }

    @Test func loadingNeverCreatesTheSecretAndSetUpDoes() throws {
        let home = Home()
        try SecureFile.makePrivateDirectory(home.root.path)
        #expect(throws: KeychainError.deviceSecretMissing) { try home.loadOnly() }
        #expect(!SecureFile.exists(home.secret))
        #expect(!SecureFile.exists("\(home.root.path)/state"))
        let created = try home.device()
        #expect(SecureFile.exists(home.secret))
        // Set-up again, and an ordinary load, both give back the same secret (same pepper), not a new one.
        #expect(try home.device().pepper(label: "x") == created.pepper(label: "x"))
        #expect(try home.loadOnly().pepper(label: "x") == created.pepper(label: "x"))
    }

    @Test func listingOnAnotherMachineIsADeviceMismatchNotAnEmptyList() throws {
        let home = Home()
        let protection = KeychainAddress(service: "coffer.protection", account: "alice")
        let keychain = try FileKeychain(folder: home.keychain, device: home.device(machineID: "machine-A"))
        try keychain.add(SecretBytes(copying: [1]), at: protection, accessibility: .afterFirstUnlockThisDeviceOnly)
        #expect(try keychain.addresses(accessGroup: "coffer", service: "coffer.protection") == [protection])
        let elsewhere = try FileKeychain(folder: home.keychain, device: home.device(machineID: "machine-B"))
        #expect(throws: KeychainError.deviceMismatch) {
            try elsewhere.addresses(accessGroup: "coffer", service: "coffer.protection")
        }
    }

    @Test func listingSkipsADamagedItemButKeepsTheOthers() throws {
        let home = Home()
        let keychain = try FileKeychain(folder: home.keychain, device: home.device())
        let alice = KeychainAddress(service: "coffer.protection", account: "alice")
        try keychain.add(SecretBytes(copying: [1]), at: alice, accessibility: .afterFirstUnlockThisDeviceOnly)
        try SecureFile.writeAtomically(
            Array("CFKC".utf8) + [1, 5, 0, 0],
            to: "\(home.keychain)/\(String(repeating: "0", count: 64)).item"
        )
        #expect(try keychain.addresses(accessGroup: "coffer", service: "coffer.protection") == [alice])
    }

    @Test func aLoosenedDeviceSecretIsRefused() throws {
        let home = Home()
        _ = try home.device()
        chmod(home.secret, 0o644)
        #expect(throws: KeychainError.self) { try home.loadOnly() }
        #expect(notPrivate { try home.loadOnly() })
        #expect(notPrivate { try home.device() })
        chmod(home.secret, 0o600)
        _ = try home.loadOnly()
    }

    @Test func aLoosenedStateFolderIsRefused() throws {
        let home = Home()
        _ = try home.device()
        chmod("\(home.root.path)/state", 0o755)
        #expect(notPrivate { try home.loadOnly() })
        chmod("\(home.root.path)/state", 0o700)
        _ = try home.loadOnly()
    }

    @Test func aLoosenedKeychainFolderIsRefused() throws {
        let home = Home()
        _ = try FileKeychain(folder: home.keychain, device: home.device())
        chmod(home.keychain, 0o755)
        #expect(notPrivate { try FileKeychain(folder: home.keychain, device: home.device()) })
    }

    @Test func aWriteInProgressSurvivesAnotherKeychainsStartUp() throws {
        let home = Home()
        let device = try home.device()
        let paused = DispatchSemaphore(value: 0)
        let resume = DispatchSemaphore(value: 0)
        let folder = home.keychain
        let writer = try FileKeychain(folder: folder, device: device) { step, path in
            guard step == .written, path.hasPrefix(folder) else { return }
            paused.signal()
            resume.wait()
        }
        let outcome = NIOLockedValueBox<Result<Void, KeychainError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let address = self.address
        Thread.detachNewThread {
            let result = Result { () throws(KeychainError) in
                try writer.add(
                    SecretBytes(copying: [5, 6]),
                    at: address,
                    accessibility: .afterFirstUnlockThisDeviceOnly
                )
            }
            outcome.withLockedValue { $0 = result }
            done.signal()
        }
        paused.wait()
        let temporaries = try SecureFile.list(folder).filter { $0.contains(".tmp-") }
        #expect(temporaries.count == 1)
        // Another process starting up now (here another instance with its own lock) must not delete that file.
        _ = try FileKeychain(folder: folder, device: device)
        #expect(try SecureFile.list(folder).filter { $0.contains(".tmp-") } == temporaries)
        resume.signal()
        done.wait()
        #expect(throws: Never.self) { try outcome.withLockedValue { $0 }?.get() }
        #expect(try FileKeychain(folder: folder, device: device).read(address) == SecretBytes(copying: [5, 6]))
    }

    @Test func theDeviceIdentityNeverPrintsItsSecret() throws {
        let secret = (0..<32).map { UInt8($0 &* 7 &+ 3) }
        let identity = try DeviceIdentity(secret: SecretBytes(copying: secret), machineID: Array("m-1".utf8))
        #expect(Redaction.leaks(of: secret, in: identity).isEmpty)
        #expect(Redaction.renderings(of: identity).allSatisfy { !$0.contains("m-1") && !$0.contains("[109, 45, 49]") })
        // A positive control: the same check finds the bytes when they are there.
        #expect(!Redaction.leaks(of: secret, in: secret).isEmpty)
        let pepper = identity.pepper(label: "pin-kdf").withUnsafeBytes { Array($0) }
        #expect(Redaction.leaks(of: pepper, in: identity.pepper(label: "pin-kdf")).isEmpty)
    }

    @Test func everyFlippedByteOrTruncationIsCorruptNeverGarbage() throws {
        let home = Home()
        let keychain = try FileKeychain(folder: home.keychain, device: home.device())
        try keychain.add(SecretBytes(copying: [7, 7, 7]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        let file = "\(home.keychain)/\(try SecureFile.list(home.keychain).first { $0.hasSuffix(".item") }!)"
        let original = try #require(try SecureFile.read(file))
        for index in original.indices {
            var tampered = original
            tampered[index] ^= 0x01
            try SecureFile.writeAtomically(tampered, to: file)
            #expect(throws: KeychainError.self) { try keychain.read(address) }
        }
        for length in [0, 3, 6, 20, original.count - 1] {
            try SecureFile.writeAtomically(Array(original.prefix(length)), to: file)
            #expect(throws: KeychainError.corruptItem) { try keychain.read(address) }
        }
        try SecureFile.writeAtomically(original, to: file)
        #expect(try keychain.read(address) == SecretBytes(copying: [7, 7, 7]))
    }

    @Test func anItemMovedToAnotherAddressDoesNotOpen() throws {
        let home = Home()
        let keychain = try FileKeychain(folder: home.keychain, device: home.device())
        let other = KeychainAddress(service: "coffer.mainkey.none", account: "mallory")
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        try keychain.add(SecretBytes(copying: [2]), at: other, accessibility: .afterFirstUnlockThisDeviceOnly)
        let names = try SecureFile.list(home.keychain).filter { $0.hasSuffix(".item") }
        let first = try #require(try SecureFile.read("\(home.keychain)/\(names[0])"))
        try SecureFile.writeAtomically(first, to: "\(home.keychain)/\(names[1])")
        let results = [try? keychain.read(address), try? keychain.read(other)]
        #expect(results.contains { $0 == nil })
    }

    @Test func corruptDeviceSecretIsReported() throws {
        let home = Home()
        _ = try home.device()
        try SecureFile.writeAtomically([1, 2, 3], to: home.secret)
        #expect(throws: KeychainError.corruptDeviceSecret) { try home.device() }
    }

    @Test func interruptedWritesLeaveTheOldValueAndNoLeftovers() throws {
        let home = Home()
        let folder = home.keychain
        try FileKeychain(folder: folder, device: home.device())
            .add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        let keychain = try FileKeychain(folder: folder, device: home.device()) { step, path in
            if step == .synced && path.hasPrefix(folder) { throw CancellationError() }
        }
        #expect(throws: KeychainError.self) { try keychain.update(SecretBytes(copying: [2]), at: address) }
        let reopened = try FileKeychain(folder: home.keychain, device: home.device())
        #expect(try reopened.read(address) == SecretBytes(copying: [1]))
        #expect(try SecureFile.list(home.keychain).allSatisfy { !$0.contains(".tmp-") })
    }

    @Test func errorDescriptionsAreSentences() {
        let errors: [KeychainError] = [
            .itemNotFound, .duplicateItem, .deviceMismatch, .corruptItem, .corruptDeviceSecret, .deviceSecretMissing,
            .notAccessible(.whenUnlocked, because: "the device is locked"),
        ]
        for error in errors { #expect(error.description.hasSuffix(".")) }
    }
}

/// Whether `body` throws the keychain's wrapping of ``CofferCryptoError/notPrivate(_:reason:)``.
func notPrivate(_ body: () throws -> Any) -> Bool {
    do {
        _ = try body()
        return false
    } catch KeychainError.storage(.notPrivate(_, _)) {
        return true
    } catch {
        return false
    }
}
