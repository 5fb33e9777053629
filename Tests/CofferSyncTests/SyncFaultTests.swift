import CofferStore
import CofferTesting
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import Testing

@testable import CofferSync

/// How the scripted server's first connection breaks while it sends the message.
enum ScriptedFault: Sendable, CaseIterable {
    /// It closes the connection in the middle of the literal.
    case closeMidLiteral
    /// It sends half the literal and then nothing, with the connection open.
    case stallMidLiteral
    /// It sends a FETCH response that is not IMAP.
    case garbage
}

/// A tiny scripted IMAP server over TLS (certificate A) with one message; its first connection breaks as `fault`
/// says while it sends that message, later connections serve it whole.
private final class ScriptedIMAPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    static let message = SyncMail.message("faultmarker", extraBody: String(repeating: "fault padding\r\n", count: 400))

    let fault: ScriptedFault?
    var pending: [UInt8] = []

    init(fault: ScriptedFault?) { self.fault = fault }

    func channelActive(context: ChannelHandlerContext) {
        send(context, "* OK [CAPABILITY IMAP4rev1 LITERAL+] scripted server\r\n")
        context.fireChannelActive()
    }

    func send(_ context: ChannelHandlerContext, _ text: String, bytes: [UInt8] = [], close: Bool = false) {
        var buffer = context.channel.allocator.buffer(string: text)
        buffer.writeBytes(bytes)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            if close { channel.close(promise: nil) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        pending += buffer.readBytes(length: buffer.readableBytes) ?? []
        while let end = pending.firstIndex(of: 0x0A) {
            let line = String(decoding: pending[..<end], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            pending.removeSubrange(...end)
            let words = line.split(separator: " ").map(String.init)
            // A line that is not `C<n> COMMAND …` is the rest of a LITERAL+ command (the password): skipped.
            guard words.count >= 2, words[0].hasPrefix("C"), Int(words[0].dropFirst()) != nil else { continue }
            answer(context, tag: words[0], command: words[1].uppercased(), rest: Array(words.dropFirst(2)))
        }
    }

    func answer(_ context: ChannelHandlerContext, tag: String, command: String, rest: [String]) {
        let body = Self.message
        switch command {
        case "CAPABILITY": send(context, "* CAPABILITY IMAP4rev1 LITERAL+\r\n\(tag) OK done\r\n")
        case "SELECT", "EXAMINE":
            send(
                context,
                "* 1 EXISTS\r\n* OK [UIDVALIDITY 5] v\r\n* OK [UIDNEXT 2] n\r\n\(tag) OK [READ-WRITE] done\r\n"
            )
        case "UID" where rest.first?.uppercased() == "SEARCH": send(context, "* SEARCH 1\r\n\(tag) OK done\r\n")
        case "UID" where rest.first?.uppercased() == "FETCH" && rest.joined().uppercased().contains("BODY.PEEK[]"):
            let head =
                "* 1 FETCH (UID 1 FLAGS () INTERNALDATE \"01-Jan-2024 10:00:00 +0000\" RFC822.SIZE \(body.count) "
                + "BODY[] {\(body.count)}\r\n"
            switch fault {
            case .closeMidLiteral?: send(context, head, bytes: Array(body.prefix(body.count / 2)), close: true)
            case .stallMidLiteral?: send(context, head, bytes: Array(body.prefix(body.count / 2)))
            case .garbage?: send(context, "* 1 FETCH (UID ((( \u{1}garbage\r\n\(tag) OK done\r\n")
            case nil: send(context, head, bytes: body + Array(")\r\n\(tag) OK done\r\n".utf8))
            }
        case "UID" where rest.first?.uppercased() == "FETCH":
            send(context, "* 1 FETCH (UID 1 FLAGS ())\r\n\(tag) OK done\r\n")
        case "LOGOUT": send(context, "* BYE bye\r\n\(tag) OK done\r\n", close: true)
        default: send(context, "\(tag) OK done\r\n")
        }
    }
}

struct SyncFaultTests {
    @Test(arguments: ScriptedFault.allCases)
    func aBrokenServerIsATypedErrorAndTheNextSyncResumes(fault: ScriptedFault) async throws {
        let certs = TemporaryDirectory(prefix: "coffer-sync-fault")
        try TestServers.makeCertificates(in: certs.path, name: SyncDovecot.name)
        let chain = try NIOSSLCertificate.fromPEMFile("\(certs.path)/a-chain.pem")
        let key = try NIOSSLPrivateKey(file: "\(certs.path)/a.key", format: .pem)
        let context = try NIOSSLContext(
            configuration: .makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) },
                privateKey: .privateKey(key)
            )
        )
        let connections = Atomic<Int>(0)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                let first = connections.add(1, ordering: .sequentiallyConsistent).oldValue == 0
                return child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try child.pipeline.syncOperations.addHandler(ScriptedIMAPHandler(fault: first ? fault : nil))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }

        let world = try await SyncWorld()
        let account = try await world.store.addServerAccount(
            ServerAccount(
                host: SyncDovecot.name,
                port: server.localAddress?.port ?? 0,
                username: "alice",
                password: "pw-scripted",
                caFile: "\(certs.path)/ca.pem",
                connectAddress: "127.0.0.1"
            )
        )
        var syncer = Syncer(store: world.store, timeout: .seconds(60))
        syncer.responseTimeout = .seconds(1)
        do {
            _ = try await syncer.sync(accountID: account)
            Issue.record("a sync through a broken server succeeded")
        } catch {
            switch (fault, error) {
            case (.closeMidLiteral, .imap(.connectionClosed)), (.stallMidLiteral, .imap(.stalled(seconds: 1))),
                (.garbage, .imap(.syntax)):
                break
            default: Issue.record("\(fault): unexpected \(error)")
            }
            #expect(!error.description.contains("faultmarker"))
        }
        #expect(try await world.store.count() == 0)
        #expect(try await world.store.syncFolder(accountID: account, name: "INBOX")?.highestUID == 0)

        let resumed = try await syncer.sync(accountID: account)
        #expect(resumed.fetched == 1)
        let stored = try #require(try await world.store.search("faultmarker").first)
        #expect(stored.size == ScriptedIMAPHandler.message.count)
        #expect(try await syncer.sync(accountID: account).fetched == 0)
    }
}
