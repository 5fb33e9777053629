import Foundation
import NIOCore
import Testing
import X509

@testable import CofferTransport

/// Real TLS on 127.0.0.1 against an in-process NIOSSL server, with certificates made by openssl.
@Suite(.serialized) struct PinnedTLSTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.get() }

    func serve(_ name: String) async throws -> TestTLSServer {
        try await TestTLSServer.start(chain: pki.path("\(name)-chain.pem"), key: pki.path("\(name).key"))
    }

    func refusal(_ configuration: PinnedTLSConfiguration) async -> TransportError? {
        do {
            let connection = try await PinnedTLS.connect(configuration)
            _ = try? await readGreeting(connection)
            return nil
        } catch {
            return error
        }
    }

    @Test func spkiPinsMatchOpenSSLForRSAAndECKeys() throws {
        #expect(try SPKIPin(certificate: pki.certificate("a")) == pki.pin("a"))
        #expect(try SPKIPin(certificate: pki.certificate("b")) == pki.pin("b"))
        #expect(try SPKIPin(certificate: pki.certificate("ca")) == pki.pin("ca"))
        #expect(try pki.pin("a") != pki.pin("b"))
    }

    @Test func pinnedCertificateAConnectsAndReadsTheGreeting() async throws {
        let server = try await serve("a")
        defer { Task { await server.stop() } }
        let connection = try await PinnedTLS.connect(pki.configuration(port: server.port, policy: pki.policy("a")))
        #expect(try await readGreeting(connection).hasPrefix("* OK"))
        #expect(connection.pinEvaluation == .matched(entry: try pki.policy("a").hosts[0], pin: try pki.pin("a")))
        #expect(connection.chainPins == [try pki.pin("a"), try pki.pin("ca")])
    }

    @Test func pinningTheCAKeyAcceptsEveryCertificateItIssues() async throws {
        let server = try await serve("b")
        defer { Task { await server.stop() } }
        let connection = try await PinnedTLS.connect(pki.configuration(port: server.port, policy: pki.policy("ca")))
        #expect(try await readGreeting(connection).hasPrefix("* OK"))
    }

    @Test func certificateBWithAValidChainButNotPinnedIsRefused() async throws {
        let server = try await serve("b")
        defer { Task { await server.stop() } }
        let reporter = RecordingReporter()
        let error = try await refusal(pki.configuration(port: server.port, policy: pki.policy("a"), reporter: reporter))
        let expected = [try pki.pin("a"), try pki.pin("backup")].sorted().map(\.base64)
        let seen = [try pki.pin("b"), try pki.pin("ca")].map(\.base64)
        #expect(error == .pinMismatch(host: TestPKI.name, expected: expected, seen: seen))
        let text = error?.description ?? ""
        #expect(text.contains(TestPKI.name) && expected.allSatisfy(text.contains) && seen.allSatisfy(text.contains))
        #expect(reporter.reports.count == 1)
        #expect(reporter.reports.first?.enforced == true)
        #expect(reporter.reports.first?.result == "pinMismatch")
    }

    @Test func rogueCACertificateIsRefusedByTheChainCheck() async throws {
        let server = try await serve("rogue")
        defer { Task { await server.stop() } }
        let error = try await refusal(pki.configuration(port: server.port, policy: pki.policy("a")))
        guard case .untrustedChain(let host, _) = error else {
            Issue.record("expected untrustedChain, got \(String(describing: error))")
            return
        }
        #expect(host == TestPKI.name)
    }

    @Test func rogueCACertificateIsRefusedEvenWhenItsKeyIsPinned() async throws {
        let server = try await serve("rogue")
        defer { Task { await server.stop() } }
        let reporter = RecordingReporter()
        let error = try await refusal(
            pki.configuration(port: server.port, policy: pki.policy("rogue"), reporter: reporter)
        )
        guard case .untrustedChain = error else {
            Issue.record("expected untrustedChain (chain before pins), got \(String(describing: error))")
            return
        }
        #expect(reporter.reports.isEmpty)
    }

    @Test func withoutPinsTheChainIsStillValidated() async throws {
        let server = try await serve("rogue")
        defer { Task { await server.stop() } }
        let error = await refusal(pki.configuration(port: server.port, policy: nil))
        guard case .untrustedChain = error else {
            Issue.record("expected untrustedChain without a pin policy, got \(String(describing: error))")
            return
        }
    }

    @Test(arguments: ["other.coffer.test", "coffer.test", "mail.coffer.test.evil", "127.0.0.1"])
    func aWrongHostnameIsRefused(name: String) async throws {
        let server = try await serve("a")
        defer { Task { await server.stop() } }
        // The pins would match: only the name is wrong.
        let policy = try PinPolicy(hosts: [HostPinPolicy(host: name, pins: [pki.pin("a"), pki.pin("backup")])])
        let error = await refusal(pki.configuration(port: server.port, policy: policy, serverName: name))
        #expect(error == .hostnameMismatch(host: name))
    }

    @Test func anExpiredPinSetConnectsAndReports() async throws {
        let server = try await serve("b")
        defer { Task { await server.stop() } }
        let reporter = RecordingReporter()
        let policy = try pki.policy("a", expires: Date(timeIntervalSinceNow: -3600))
        let connection = try await PinnedTLS.connect(
            pki.configuration(port: server.port, policy: policy, reporter: reporter)
        )
        #expect(try await readGreeting(connection).hasPrefix("* OK"))
        guard case .expired(_, .pinMismatch) = connection.pinEvaluation else {
            Issue.record("expected an expired pin mismatch, got \(connection.pinEvaluation)")
            return
        }
        #expect(reporter.reports.count == 1)
        #expect(reporter.reports.first?.enforced == false)
        #expect(reporter.reports.first?.servedChainPins == [try pki.pin("b").base64, try pki.pin("ca").base64])
    }

    @Test func anExpiredPinSetStillRequiresAValidChain() async throws {
        let server = try await serve("rogue")
        defer { Task { await server.stop() } }
        let policy = try pki.policy("rogue", expires: Date(timeIntervalSinceNow: -3600))
        let error = await refusal(pki.configuration(port: server.port, policy: policy))
        guard case .untrustedChain = error else {
            Issue.record("expected untrustedChain, got \(String(describing: error))")
            return
        }
    }

    @Test func aPolicyWhoseEveryPinIsServedHasNoBackupAndIsRefused() async throws {
        let server = try await serve("a")
        defer { Task { await server.stop() } }
        let policy = try PinPolicy(hosts: [HostPinPolicy(host: TestPKI.name, pins: [pki.pin("a"), pki.pin("ca")])])
        let error = await refusal(pki.configuration(port: server.port, policy: policy))
        guard case .noBackupPin(let host, _) = error else {
            Issue.record("expected noBackupPin, got \(String(describing: error))")
            return
        }
        #expect(host == TestPKI.name)
    }

    @Test func anExpiredServerCertificateIsRefused() async throws {
        let server = try await serve("a")
        defer { Task { await server.stop() } }
        let later = Date(timeIntervalSinceNow: 900 * 24 * 3600)  // A is valid for 825 days
        let error = try await refusal(pki.configuration(port: server.port, policy: pki.policy("a"), now: { later }))
        guard case .certificateExpired(let host, _) = error else {
            Issue.record("expected certificateExpired, got \(String(describing: error))")
            return
        }
        #expect(host == TestPKI.name)
    }

    @Test func subdomainPinsApplyWithIncludeSubdomains() async throws {
        let server = try await serve("b")
        defer { Task { await server.stop() } }
        let policy = try PinPolicy(hosts: [
            HostPinPolicy(host: "coffer.test", pins: [pki.pin("a"), pki.pin("backup")], includeSubdomains: true)
        ])
        let error = await refusal(pki.configuration(port: server.port, policy: policy))
        guard case .pinMismatch = error else {
            Issue.record("expected the parent domain's pins to refuse B, got \(String(describing: error))")
            return
        }
    }

    @Test func presentedChainShowsTheRogueChainWithoutTrustingIt() async throws {
        let server = try await serve("rogue")
        defer { Task { await server.stop() } }
        let chain = try await PinnedTLS.presentedChain(
            serverName: TestPKI.name,
            port: server.port,
            connectAddress: "127.0.0.1"
        )
        #expect(chain.map(\.pin) == [try pki.pin("rogue"), try pki.pin("rogue-ca")])
        #expect(chain.first?.subject.contains(TestPKI.name) == true)
    }

    @Test func aClosedPortIsAConnectError() async throws {
        let server = try await TestTLSServer.silent()
        let port = server.port
        await server.stop()
        let error = await refusal(pki.configuration(port: port, policy: nil))
        guard case .connectFailed(_, let failedPort, _) = error else {
            Issue.record("expected connectFailed, got \(String(describing: error))")
            return
        }
        #expect(failedPort == port)
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        let server = try await TestTLSServer.silent()
        defer { Task { await server.stop() } }
        var configuration = pki.configuration(port: server.port, policy: nil)
        configuration.timeout = .milliseconds(300)
        let error = await refusal(configuration)
        #expect(error == .timedOut(host: TestPKI.name, port: server.port))
    }

    @Test func theSystemTrustStoreDoesNotTrustTheTestCA() async throws {
        let server = try await serve("a")
        defer { Task { await server.stop() } }
        var configuration = pki.configuration(port: server.port, policy: try pki.policy("a"))
        configuration.trustRoots = .system
        guard case .untrustedChain = await refusal(configuration) else {
            Issue.record("a private CA must not be trusted unless its bundle is given")
            return
        }
    }

    @Test func aServerThatAnswersInClearTextIsAHandshakeFailure() async throws {
        let server = try await TestTLSServer.plaintext()
        defer { Task { await server.stop() } }
        let error = await refusal(pki.configuration(port: server.port, policy: try pki.policy("a")))
        guard case .handshakeFailed(let host, _) = error else {
            Issue.record("expected handshakeFailed, got \(String(describing: error))")
            return
        }
        #expect(host == TestPKI.name)
    }

    @Test func anUnreadableCABundleIsTyped() async throws {
        var configuration = pki.configuration(port: 1, policy: nil)
        configuration.trustRoots = .caBundle(path: pki.path("a.pin"))
        guard case .unreadableCABundle = await refusal(configuration) else {
            Issue.record("expected unreadableCABundle")
            return
        }
    }
}
