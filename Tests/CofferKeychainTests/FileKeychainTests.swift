import CofferCrypto
import CofferKeychain
import CofferTesting
import Foundation
import Testing

@Suite struct FileKeychainTests {
    let address = KeychainAddress(service: "coffer.mainkey.none", account: "alice@example.com")

    struct Home {
        let root = TemporaryDirectory()
        var keychain: String { "\(root.path)/data/keychain" }
        var secret: String { "\(root.path)/state/device-secret" }
        var machine: String { "\(root.path)/machine-id" }

        func device(machineID: String = "machine-A") throws -> DeviceIdentity {
            try SecureFile.makePrivateDirectory(root.path)
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

    @Test func missingDeviceSecretIsADeviceMismatch() throws {
        let home = Home()
        try FileKeychain(folder: home.keychain, device: home.device())
            .add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlock)
        try SecureFile.remove(home.secret)
        let fresh = try FileKeychain(folder: home.keychain, device: home.device())
        #expect(throws: KeychainError.deviceMismatch) { try fresh.read(address) }
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
        let keychain = try FileKeychain(folder: home.keychain, device: home.device())
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        let folder = home.keychain
        SecureFile.testCrashPoint = { step, path in
            if step == "synced" && path.hasPrefix(folder) { throw CancellationError() }
        }
        #expect(throws: KeychainError.self) { try keychain.update(SecretBytes(copying: [2]), at: address) }
        SecureFile.testCrashPoint = nil
        let reopened = try FileKeychain(folder: home.keychain, device: home.device())
        #expect(try reopened.read(address) == SecretBytes(copying: [1]))
        #expect(try SecureFile.list(home.keychain).allSatisfy { !$0.contains(".tmp-") })
    }

    @Test func errorDescriptionsAreSentences() {
        let errors: [KeychainError] = [
            .itemNotFound, .duplicateItem, .deviceMismatch, .corruptItem, .corruptDeviceSecret,
            .notAccessible(.whenUnlocked, because: "the device is locked"),
        ]
        for error in errors { #expect(error.description.hasSuffix(".")) }
    }
}
