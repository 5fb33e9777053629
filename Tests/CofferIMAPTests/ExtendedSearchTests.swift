import Testing

@testable import CofferIMAP

/// `ESEARCH` answers (RFC 4731), which large folders are listed with (issue 25, item 1).
struct ExtendedSearchTests {
    @Test func anESearchAnswerIsReadWithItsTagRangesAndCounts() throws {
        #expect(
            try parseOne("* ESEARCH (TAG \"C12\") UID ALL 1:3,5,9:7 MIN 1 MAX 9 COUNT 7 MODSEQ 88\r\n")
                == .untagged(
                    .esearch(
                        ExtendedSearchResult(
                            tag: "C12",
                            uid: true,
                            all: [1...3, 5...5, 7...9],
                            min: 1,
                            max: 9,
                            count: 7,
                            modSeq: 88
                        )
                    )
                )
        )
        // Nothing matched: the server leaves ALL out.
        #expect(try parseOne("* ESEARCH (TAG \"C3\") UID\r\n") == .untagged(.esearch(.init(tag: "C3", uid: true))))
        // No correlator, no UID, and a result name this client does not know (skipped with its value).
        #expect(
            try parseOne("* ESEARCH PARTIAL (1:10 NIL) COUNT 0\r\n") == .untagged(.esearch(.init(count: 0)))
        )
    }

    @Test func aMalformedESearchAnswerIsASyntaxError() {
        for text in [
            "* ESEARCH (TAG \"C1\") UID ALL 1:*\r\n",
            "* ESEARCH (TAG \"C1\") UID ALL 0:4\r\n",
            "* ESEARCH (TAG \"C1\") UID ALL x\r\n",
            "* ESEARCH (TOG \"C1\") UID\r\n",
            "* ESEARCH (TAG \"C1\" UID\r\n",
            "* ESEARCH UID COUNT 99999999999\r\n",
        ] {
            #expect(throws: IMAPError.self, "\(text)") { _ = try parseOne(text) }
        }
    }

    /// A range a million UIDs long is one short line: what lets a large folder be listed in few answers.
    @Test func aLongRunOfUIDsIsOneRange() throws {
        guard case .untagged(.esearch(let result)) = try parseOne("* ESEARCH UID ALL 1:1000000\r\n") else {
            Issue.record("not an ESEARCH answer")
            return
        }
        #expect(result.all == [1...1_000_000])
    }
}
