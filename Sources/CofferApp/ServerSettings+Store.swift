import CofferAgentProtocol
import CofferStore
import CofferTransport
import Foundation

/// The agent protocol's server settings from and to the store's account records (the protocol module knows no
/// store, so that a client of the agent links neither the store nor the network code).
extension ServerSettings {
    /// Settings from an account record (its password left out).
    public init(_ server: ServerAccount, id: Int64? = nil) {
        self.init(
            id: id,
            host: server.endpoint.host,
            port: server.endpoint.port,
            startTLS: server.endpoint.security == .startTLS,
            username: server.username,
            pins: server.endpoint.pins,
            caFile: server.endpoint.caFile,
            connectAddress: server.endpoint.connectAddress,
            pinReportURL: server.endpoint.pinReportURL,
            pinExpires: server.endpoint.pinExpires.map { Int64($0.timeIntervalSince1970) },
            submission: server.submission.map(SubmissionSettings.init)
        )
    }

    /// The account record with `password` (the submission server, if any, logs in with the same).
    public func account(password: String) -> ServerAccount {
        var account = ServerAccount(
            host: host,
            port: port,
            username: username,
            password: password,
            pins: pins,
            caFile: caFile,
            connectAddress: connectAddress,
            startTLS: startTLS,
            pinReportURL: pinReportURL,
            pinExpires: pinExpires.map { Date(timeIntervalSince1970: TimeInterval($0)) }
        )
        account.submission = submission?.server
        return account
    }
}

extension SubmissionSettings {
    /// The settings of a stored submission server (its password left out).
    public init(_ server: SubmissionServer) {
        self.init(
            host: server.endpoint.host,
            port: server.endpoint.port,
            startTLS: server.endpoint.security == .startTLS,
            pins: server.endpoint.pins,
            caFile: server.endpoint.caFile,
            connectAddress: server.endpoint.connectAddress,
            address: server.address,
            username: server.username
        )
    }

    /// The record.
    public var server: SubmissionServer {
        SubmissionServer(
            endpoint: ServerEndpoint(
                host: host,
                port: port,
                security: startTLS ? .startTLS : .implicitTLS,
                pins: pins,
                caFile: caFile,
                connectAddress: connectAddress
            ),
            address: address,
            username: username
        )
    }
}
