import CofferCrypto
import CofferKeychain
import CofferTesting
import Testing

/// One suite that every ``Keychain`` must pass.
@Suite struct KeychainConformanceTests {
    /// A keychain under test with its device state and (for files) its folder.
    struct Subject: CustomTestStringConvertible, Sendable {
        var name: String
        var make: @Sendable (TestDeviceState) throws -> (any Keychain, TemporaryDirectory?)
        var testDescription: String { name }
    }

    static let subjects: [Subject] = [
        Subject(name: "InMemoryKeychain") { state in (InMemoryKeychain(state: state), nil) },
        Subject(name: "FileKeychain") { state in
            let folder = TemporaryDirectory()
            return (
                try FileKeychain(folder: "\(folder.path)/keychain", device: Fixtures.device(), state: state), folder
            )
        },
    ]

    let address = KeychainAddress(service: "coffer.test", account: "alice")

    @Test(arguments: subjects)
    func addReadUpdateDelete(subject: Subject) throws {
        let (keychain, folder) = try subject.make(TestDeviceState())
        _ = folder
        try keychain.add(SecretBytes(copying: [1, 2, 3]), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        #expect(try keychain.read(address) == SecretBytes(copying: [1, 2, 3]))
        #expect(throws: KeychainError.duplicateItem) {
            try keychain.add(SecretBytes(copying: [9]), at: address, accessibility: .whenUnlocked)
        }
        try keychain.update(SecretBytes(copying: [4, 5]), at: address)
        #expect(try keychain.read(address) == SecretBytes(copying: [4, 5]))
        try keychain.delete(address)
        #expect(throws: KeychainError.itemNotFound) { try keychain.read(address) }
        #expect(throws: KeychainError.itemNotFound) { try keychain.update(SecretBytes(copying: [1]), at: address) }
        try keychain.delete(address)
        #expect(try keychain.readIfPresent(address) == nil)
    }

    @Test(arguments: subjects)
    func addressesAreDistinctAndListable(subject: Subject) throws {
        let (keychain, folder) = try subject.make(TestDeviceState())
        _ = folder
        let others = [
            KeychainAddress(service: "coffer.test", account: "bob"),
            KeychainAddress(service: "coffer.other", account: "alice"),
            KeychainAddress(accessGroup: "elsewhere", service: "coffer.test", account: "alice"),
        ]
        try keychain.set(SecretBytes(copying: [0]), at: address, accessibility: .whenUnlocked)
        for (index, other) in others.enumerated() {
            try keychain.set(SecretBytes(copying: [UInt8(index + 1)]), at: other, accessibility: .whenUnlocked)
        }
        #expect(try keychain.read(address) == SecretBytes(copying: [0]))
        #expect(try keychain.read(others[2]) == SecretBytes(copying: [3]))
        #expect(try keychain.addresses(accessGroup: "coffer", service: "coffer.test") == [address, others[0]])
    }

    @Test(arguments: subjects)
    func lockedDeviceGatesWhenUnlockedClasses(subject: Subject) throws {
        let state = TestDeviceState()
        let (keychain, folder) = try subject.make(state)
        _ = folder
        let later = KeychainAddress(service: "coffer.test", account: "after-first-unlock")
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .whenUnlockedThisDeviceOnly)
        try keychain.add(SecretBytes(copying: [2]), at: later, accessibility: .afterFirstUnlockThisDeviceOnly)
        state.lock()
        #expect(throws: KeychainError.self) { try keychain.read(address) }
        #expect(try keychain.read(later) == SecretBytes(copying: [2]))
        state.reboot()
        #expect(throws: KeychainError.self) { try keychain.read(later) }
        state.unlock()
        #expect(try keychain.read(address) == SecretBytes(copying: [1]))
        #expect(try keychain.read(later) == SecretBytes(copying: [2]))
    }

    @Test(arguments: subjects)
    func removingThePasscodeDeletesPasscodeItems(subject: Subject) throws {
        let state = TestDeviceState()
        let (keychain, folder) = try subject.make(state)
        _ = folder
        let kept = KeychainAddress(service: "coffer.test", account: "kept")
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .whenPasscodeSetThisDeviceOnly)
        try keychain.add(SecretBytes(copying: [2]), at: kept, accessibility: .afterFirstUnlockThisDeviceOnly)
        state.setPasscode(false)
        try keychain.passcodeRemoved()
        state.setPasscode(true)
        #expect(throws: KeychainError.itemNotFound) { try keychain.read(address) }
        #expect(try keychain.read(kept) == SecretBytes(copying: [2]))
        state.setPasscode(false)
        #expect(throws: KeychainError.self) {
            try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .whenPasscodeSetThisDeviceOnly)
        }
    }

    @Test(arguments: subjects)
    func passcodeItemsVanishWhenReadWithoutPasscode(subject: Subject) throws {
        let state = TestDeviceState()
        let (keychain, folder) = try subject.make(state)
        _ = folder
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .whenPasscodeSetThisDeviceOnly)
        state.setPasscode(false)
        #expect(throws: KeychainError.itemNotFound) { try keychain.read(address) }
        state.setPasscode(true)
        #expect(throws: KeychainError.itemNotFound) { try keychain.read(address) }
    }

    /// `contains` says what `read` would, without the value: absent, present, not accessible now, gone with the
    /// passcode.
    @Test(arguments: subjects)
    func containsAgreesWithRead(subject: Subject) throws {
        let state = TestDeviceState()
        let (keychain, folder) = try subject.make(state)
        _ = folder
        let passcode = KeychainAddress(service: "coffer.test", account: "passcode")
        #expect(try !keychain.contains(address))
        try keychain.add(SecretBytes(copying: [1]), at: address, accessibility: .whenUnlockedThisDeviceOnly)
        try keychain.add(SecretBytes(copying: [2]), at: passcode, accessibility: .whenPasscodeSetThisDeviceOnly)
        #expect(try keychain.contains(address) && keychain.contains(passcode))
        state.lock()
        #expect(throws: KeychainError.self) { try keychain.contains(address) }
        #expect(throws: KeychainError.self) { try keychain.read(address) }
        state.unlock()
        #expect(try keychain.contains(address))
        state.setPasscode(false)
        #expect(try !keychain.contains(passcode))
        state.setPasscode(true)
        #expect(try !keychain.contains(passcode))
        #expect(throws: KeychainError.itemNotFound) { try keychain.read(passcode) }
        try keychain.delete(address)
        #expect(try !keychain.contains(address))
    }
}
