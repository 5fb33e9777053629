import CofferAgentProtocol
import CofferMIME
import CofferStore
import Foundation
import Testing

/// Summary page v1 (the payload of a `summaries` frame) against the pages `Fixtures/make_frame_vectors.py` writes
/// from docs/FORMAT.md with Python's `struct`.
@Suite struct SummaryPageTests {
    struct Vectors: Decodable {
        struct Address: Decodable {
            var name: String?
            var address: String
            var group: String?
        }
        struct Summary: Decodable {
            var id: Int64
            var conversationID: Int64
            var unix: Double
            var flags: Int64
            var size: Int
            var subject: String?
            var from: [Address]
        }
        struct Page: Decodable {
            var name: String
            var payload: String
            var summaries: [Summary]?
        }
        var summaryPages: [Page]
        var badSummaryPages: [Page]
    }

    static let vectors: Vectors? = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/frame_vectors.json")
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(Vectors.self, from: data)
    }()

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test func theKnownPagesDecodeToTheirSummariesAndEncodeToTheSameBytes() throws {
        let vectors = try #require(Self.vectors, "Fixtures/frame_vectors.json has no summary pages")
        #expect(vectors.summaryPages.count >= 2)
        for page in vectors.summaryPages {
            let payload = Self.bytes(page.payload)
            let decoded = try SummaryPage.decode(payload)
            let expected = (page.summaries ?? []).map { summary in
                MessageSummary(
                    id: summary.id,
                    conversationID: summary.conversationID,
                    date: Date(timeIntervalSince1970: summary.unix),
                    flags: MessageFlags(rawValue: summary.flags),
                    size: summary.size,
                    subject: summary.subject,
                    from: summary.from.map { MailAddress(name: $0.name, address: $0.address, group: $0.group) }
                )
            }
            #expect(decoded == expected, "\(page.name)")
            #expect(SummaryPage.encode(decoded) == payload, "\(page.name)")
        }
    }

    @Test func badPagesAreRefusedWithATypedError() throws {
        let vectors = try #require(Self.vectors, "Fixtures/frame_vectors.json has no summary pages")
        #expect(vectors.badSummaryPages.count >= 10)
        for page in vectors.badSummaryPages {
            #expect(throws: AppError.malformedMessage, "\(page.name)") {
                try SummaryPage.decode(Self.bytes(page.payload))
            }
        }
    }

    /// Every proper prefix of a page is refused, never read past its end.
    @Test func everyTruncationIsRefused() throws {
        let vectors = try #require(Self.vectors)
        let payload = Self.bytes(try #require(vectors.summaryPages.first).payload)
        for length in 0..<payload.count {
            #expect(throws: AppError.malformedMessage) { try SummaryPage.decode(Array(payload[0..<length])) }
        }
    }
}
