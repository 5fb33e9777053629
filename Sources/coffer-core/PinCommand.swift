import ArgumentParser
import CofferCommandLine
import CofferReading
import CofferTransport
import Foundation

/// `coffer pin HOST[:PORT]`: the SPKI pins of the chain a server presents, to set up an account's pin policy.
struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the SPKI pins (base64 SHA-256) of the certificates a server presents, without trusting it.",
        discussion: """
            The handshake is stopped as soon as the certificates are seen: nothing is sent or received after it. \
            Whatever answered is shown, attacker or not: compare a pin with one obtained another way (your \
            provider's documentation, `openssl` on a trusted network) before you use it, and add a backup pin \
            for a key the server does not use yet.
            """
    )

    @Argument(help: "The server, as HOST or HOST:PORT (port 993, IMAPS, by default).") var server: String
    @Option(name: .long, help: "Connect to this address instead of HOST (the name is still sent as SNI).")
    var connect: String?

    /// Splits `HOST[:PORT]` (and `[IPv6]:PORT`).
    static func parse(_ text: String, defaultPort: Int = 993) -> (host: String, port: Int)? {
        var host = text
        var port = defaultPort
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { return nil }
                port = value
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            guard let value = Int(text[text.index(after: colon)...]) else { return nil }
            port = value
        }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
        return (host, port)
    }

    func run() async throws {
        try await runReportingErrors {
            guard let (host, port) = Self.parse(server) else {
                throw CLIError("Give the server as HOST or HOST:PORT with a port from 1 to 65535.")
            }
            let chain = try await PinnedTLS.presentedChain(serverName: host, port: port, connectAddress: connect)
            print("Certificates presented by \(host) port \(port) (NOT verified), leaf first:")
            for (index, certificate) in chain.enumerated() {
                print("\(index). pin-sha256 \(certificate.pin.base64)")
                print("   subject \(certificate.subject)")
                print("   issuer  \(certificate.issuer)")
                print(
                    "   valid   \(certificate.notValidBefore.formatted(.iso8601)) to "
                        + "\(certificate.notValidAfter.formatted(.iso8601))"
                )
            }
        }
    }
}
