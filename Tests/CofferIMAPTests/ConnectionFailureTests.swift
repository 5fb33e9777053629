import NIOCore
import NIOSSL
import Testing

@testable import CofferIMAP

#if canImport(Glibc)
import Glibc
#endif

/// What a person reads when the connection itself fails (issue 25, item 7: a server's drop was reported as
/// "(NIOSSLError)").
struct ConnectionFailureTests {
    @Test func aTLSStreamCutWithoutItsCloseIsADroppedConnection() {
        let sentence = IMAPChannelHandler.sentence(for: NIOSSLError.uncleanShutdown)
        #expect(sentence.hasPrefix("The IMAP server dropped the connection"))
        #expect(!sentence.contains("NIOSSLError"))
    }

    @Test func aSocketErrorIsTheSystemsWords() {
        let sentence = IMAPChannelHandler.sentence(for: IOError(errnoCode: ECONNRESET, reason: "read(descriptor:)"))
        #expect(sentence == "The connection to the IMAP server failed: connection reset by peer.")
    }

    @Test func anyOtherErrorNamesOnlyItsType() {
        struct Odd: Error {}
        #expect(IMAPChannelHandler.sentence(for: Odd()) == "The connection to the IMAP server failed (Odd).")
    }
}
