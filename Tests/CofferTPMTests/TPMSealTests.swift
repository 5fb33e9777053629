import CofferCrypto
import CofferTPM
import CofferTesting
import Testing

/// A software TPM in a fresh folder (another machine each time) and a context on it. swtpm serves one connection
/// at a time, so the context is closed before another is opened.
final class TPMFixture {
    let folder = TemporaryDirectory(prefix: "coffer-tpm")
    let tpm: SoftwareTPM
    private(set) var context: TPMContext!

    init(name: String = "tpm") throws {
        tpm = try SoftwareTPM(stateDirectory: "\(folder.path)/\(name)")
        context = try TPMContext(configuration: tpm.configuration)
    }

    /// Closes the connection and opens a new one (another process of the same user).
    func reconnect() throws {
        context = nil
        context = try TPMContext(configuration: tpm.configuration)
    }

    /// Stops the TPM as a power cut would, starts it on the same state and reconnects (a reboot).
    func reboot() throws {
        context = nil
        try tpm.restart()
        context = try TPMContext(configuration: tpm.configuration)
    }

    /// Closes the connection, so another client (a Keymaker's binder) can reach the TPM.
    func disconnect() { context = nil }

    /// Closes the connection and stops the TPM.
    func stop() {
        context = nil
        tpm.stop()
    }
}

@Suite("TPM sealing against swtpm", .timeLimit(.minutes(2)))
struct TPMSealTests {
    let secret = SecretBytes(randomCount: 32)
    let pinAuth = SecretBytes(randomCount: 32)

    @Test func rightAuthUnseals() throws {
        let fixture = try TPMFixture()
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        #expect(!sealed.publicArea.isEmpty && !sealed.privateArea.isEmpty)
        // The stored blobs do not hold the secret or the auth value in clear.
        for blob in [sealed.publicArea, sealed.privateArea] {
            secret.withUnsafeBytes { #expect(!ByteSearch.contains(Array($0), in: blob)) }
            pinAuth.withUnsafeBytes { #expect(!ByteSearch.contains(Array($0), in: blob)) }
        }
        let opened = try fixture.context.unseal(sealed, authValue: pinAuth)
        #expect(opened == secret)
    }

    @Test func wrongAuthIsRefusedAsAuthorizationFailure() throws {
        let fixture = try TPMFixture()
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        #expect(throws: TPMError.authorizationFailed) {
            _ = try fixture.context.unseal(sealed, authValue: SecretBytes(randomCount: 32))
        }
        #expect(try fixture.context.unseal(sealed, authValue: pinAuth) == secret)
    }

    @Test func pastMaxTriesEvenTheRightAuthIsRefused() throws {
        let fixture = try TPMFixture()
        try fixture.context.setDictionaryAttackParameters(maxTries: 3, recoveryTime: 3600, lockoutRecovery: 3600)
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        for _ in 0..<3 {
            #expect(throws: TPMError.authorizationFailed) {
                _ = try fixture.context.unseal(sealed, authValue: SecretBytes(randomCount: 32))
            }
        }
        #expect(throws: TPMError.lockedOut) { _ = try fixture.context.unseal(sealed, authValue: pinAuth) }
        // The count is the TPM's own: a new connection, and a reboot of the same TPM, change nothing.
        try fixture.reconnect()
        #expect(throws: TPMError.lockedOut) { _ = try fixture.context.unseal(sealed, authValue: pinAuth) }
        try fixture.reboot()
        #expect(throws: TPMError.lockedOut) { _ = try fixture.context.unseal(sealed, authValue: pinAuth) }
    }

    @Test func anotherTPMCannotLoadTheBlobs() throws {
        let fixture = try TPMFixture()
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        let other = try TPMFixture(name: "other-machine")
        #expect(throws: TPMError.foreignObject) { _ = try other.context.unseal(sealed, authValue: pinAuth) }
    }

    @Test func blobsStillUnsealAfterARestartWithTheSameState() throws {
        let fixture = try TPMFixture()
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        try fixture.reboot()
        #expect(try fixture.context.unseal(sealed, authValue: pinAuth) == secret)
    }

    @Test func alteredBlobsAreRefused() throws {
        let fixture = try TPMFixture()
        let sealed = try fixture.context.seal(secret, authValue: pinAuth)
        var flipped = sealed
        flipped.privateArea[flipped.privateArea.count - 1] ^= 0x01
        #expect(throws: TPMError.foreignObject) { _ = try fixture.context.unseal(flipped, authValue: pinAuth) }
        var truncated = sealed
        truncated.publicArea.removeLast()
        #expect(throws: TPMError.malformed(what: "sealed public area")) {
            _ = try fixture.context.unseal(truncated, authValue: pinAuth)
        }
        var padded = sealed
        padded.privateArea.append(0)
        #expect(throws: TPMError.malformed(what: "sealed private area")) {
            _ = try fixture.context.unseal(padded, authValue: pinAuth)
        }
    }

    @Test(arguments: [(0, 32), (65, 32), (32, 31), (32, 33)])
    func outOfRangeInputsAreRefused(secretBytes: Int, authBytes: Int) throws {
        let fixture = try TPMFixture()
        let secret = SecretBytes(copying: [UInt8](repeating: 7, count: secretBytes))
        #expect {
            _ = try fixture.context.seal(
                secret,
                authValue: SecretBytes(copying: [UInt8](repeating: 1, count: authBytes))
            )
        } throws: { error in
            guard case .invalidArgument = error as? TPMError else { return false }
            return true
        }
    }

    @Test func noTPMIsReportedAsUnavailable() throws {
        let stopped = try TPMFixture()
        let configuration = stopped.tpm.configuration
        stopped.stop()
        #expect {
            _ = try TPMContext(configuration: configuration)
        } throws: { error in
            guard case .unavailable(let named, _) = error as? TPMError else { return false }
            return named == configuration
        }
    }
}
