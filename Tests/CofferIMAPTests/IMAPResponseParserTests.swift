import Testing

@testable import CofferIMAP

/// Parses a whole byte string and returns every event (or the error).
func parseAll(
    _ text: String,
    limits: IMAPResponseParser.Limits = .init(),
    byteByByte: Bool = false
) throws(IMAPError) -> [IMAPResponseEvent] {
    var parser = IMAPResponseParser(limits: limits)
    var events: [IMAPResponseEvent] = []
    let bytes = Array(text.utf8)
    if byteByByte {
        for byte in bytes {
            parser.feed([byte])
            while let event = try parser.next() { events.append(event) }
        }
    } else {
        parser.feed(bytes)
        while let event = try parser.next() { events.append(event) }
    }
    return events
}

func parseOne(_ text: String) throws(IMAPError) -> IMAPResponse {
    let events = try parseAll(text)
    guard events.count == 1, case .response(let response) = events[0] else {
        throw .unexpectedResponse(expected: "one response, got \(events.count) events")
    }
    return response
}

/// Collapses body chunks so byte-by-byte and all-at-once feeding compare equal.
func merged(_ events: [IMAPResponseEvent]) -> [IMAPResponseEvent] {
    var out: [IMAPResponseEvent] = []
    for event in events {
        if case .bodyChunk(let bytes) = event, case .bodyChunk(let previous)? = out.last {
            out[out.count - 1] = .bodyChunk(previous + bytes)
        } else {
            out.append(event)
        }
    }
    return out
}

struct GoodResponse: Sendable, CustomTestStringConvertible {
    var wire: String
    var expected: IMAPResponse
    var testDescription: String { String(wire.prefix(50)) }
}

let goodResponses: [GoodResponse] = [
    .init(
        wire: "* OK [CAPABILITY IMAP4rev1 SASL-IR LITERAL+ AUTH=PLAIN] Dovecot ready.\r\n",
        expected: .untagged(
            .condition(
                status: .ok,
                code: .capability(["IMAP4rev1", "SASL-IR", "LITERAL+", "AUTH=PLAIN"]),
                text: "Dovecot ready."
            )
        )
    ),
    .init(
        wire: "a1 OK [READ-WRITE] Select completed (0.001 + 0.000 secs).\r\n",
        expected: .tagged(
            .init(tag: "a1", status: .ok, code: .readWrite, text: "Select completed (0.001 + 0.000 secs).")
        )
    ),
    .init(
        wire: "a2 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n",
        expected: .tagged(
            .init(
                tag: "a2",
                status: .no,
                code: .other(name: "AUTHENTICATIONFAILED", argument: nil),
                text: "Authentication failed."
            )
        )
    ),
    .init(
        wire: "a3 BAD Error in IMAP command\r\n",
        expected: .tagged(.init(tag: "a3", status: .bad, text: "Error in IMAP command"))
    ),
    .init(wire: "+ idling\r\n", expected: .continuation("idling")),
    .init(wire: "+ \r\n", expected: .continuation("")),
    .init(wire: "+\r\n", expected: .continuation("")),
    .init(wire: "+ {5}\r\n", expected: .continuation("{5}")),
    .init(wire: "* 18 EXISTS\r\n", expected: .untagged(.exists(18))),
    .init(wire: "* 2 RECENT\r\n", expected: .untagged(.recent(2))),
    .init(wire: "* 44 EXPUNGE\r\n", expected: .untagged(.expunge(44))),
    .init(
        wire: "* CAPABILITY IMAP4rev1 IDLE CONDSTORE QRESYNC METADATA\r\n",
        expected: .untagged(.capability(["IMAP4rev1", "IDLE", "CONDSTORE", "QRESYNC", "METADATA"]))
    ),
    .init(wire: "* ENABLED CONDSTORE QRESYNC\r\n", expected: .untagged(.enabled(["CONDSTORE", "QRESYNC"]))),
    .init(wire: "* ENABLED\r\n", expected: .untagged(.enabled([]))),
    .init(
        wire: "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Forwarded)\r\n",
        expected: .untagged(.flags(["\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft", "$Forwarded"]))
    ),
    .init(
        wire: "* OK [PERMANENTFLAGS (\\Deleted \\Seen \\*)] Flags permitted.\r\n",
        expected: .untagged(
            .condition(status: .ok, code: .permanentFlags(["\\Deleted", "\\Seen", "\\*"]), text: "Flags permitted.")
        )
    ),
    .init(
        wire: "* OK [UIDVALIDITY 3857529045] UIDs valid\r\n",
        expected: .untagged(.condition(status: .ok, code: .uidValidity(3_857_529_045), text: "UIDs valid"))
    ),
    .init(
        wire: "* OK [UIDNEXT 4392] Predicted next UID\r\n",
        expected: .untagged(.condition(status: .ok, code: .uidNext(4392), text: "Predicted next UID"))
    ),
    .init(
        wire: "* OK [HIGHESTMODSEQ 715194045007] Highest\r\n",
        expected: .untagged(.condition(status: .ok, code: .highestModSeq(715_194_045_007), text: "Highest"))
    ),
    .init(
        wire: "* OK [NOMODSEQ] Sorry, this mailbox format doesn't support modsequences\r\n",
        expected: .untagged(
            .condition(
                status: .ok,
                code: .noModSeq,
                text: "Sorry, this mailbox format doesn't support modsequences"
            )
        )
    ),
    .init(
        wire: "* OK [CLOSED] Previous mailbox closed.\r\n",
        expected: .untagged(.condition(status: .ok, code: .closed, text: "Previous mailbox closed."))
    ),
    .init(
        wire: "d105 OK [MODIFIED 7,9] Conditional STORE failed\r\n",
        expected: .tagged(.init(tag: "d105", status: .ok, code: .modified("7,9"), text: "Conditional STORE failed"))
    ),
    .init(
        wire: "A003 OK [APPENDUID 38505 3955] APPEND completed\r\n",
        expected: .tagged(
            .init(tag: "A003", status: .ok, code: .appendUID(uidValidity: 38505, uid: "3955"), text: "APPEND completed")
        )
    ),
    .init(wire: "* BYE Logging out\r\n", expected: .untagged(.condition(status: .bye, code: nil, text: "Logging out"))),
    .init(wire: "* OK\r\n", expected: .untagged(.condition(status: .ok, code: nil, text: ""))),
    .init(
        wire: "* LIST (\\HasNoChildren) \".\" INBOX\r\n",
        expected: .untagged(.list(.init(attributes: ["\\HasNoChildren"], delimiter: ".", name: "INBOX")))
    ),
    .init(
        wire: "* LIST (\\Noselect \\HasChildren) \"/\" \"Archive/2024 \\\"old\\\"\"\r\n",
        expected: .untagged(
            .list(.init(attributes: ["\\Noselect", "\\HasChildren"], delimiter: "/", name: "Archive/2024 \"old\""))
        )
    ),
    .init(
        wire: "* LIST () NIL inbox\r\n",
        expected: .untagged(.list(.init(attributes: [], delimiter: nil, name: "INBOX")))
    ),
    .init(
        wire: "* LIST (\\HasNoChildren) \".\" {8}\r\nSent Box\r\n",
        expected: .untagged(.list(.init(attributes: ["\\HasNoChildren"], delimiter: ".", name: "Sent Box")))
    ),
    .init(
        wire: "* LSUB () \".\" Drafts\r\n",
        expected: .untagged(.list(.init(attributes: [], delimiter: ".", name: "Drafts", isLSUB: true)))
    ),
    .init(
        wire: "* STATUS INBOX (MESSAGES 231 UIDNEXT 44292 HIGHESTMODSEQ 7011231777)\r\n",
        expected: .untagged(
            .status(mailbox: "INBOX", items: ["MESSAGES": 231, "UIDNEXT": 44292, "HIGHESTMODSEQ": 7_011_231_777])
        )
    ),
    .init(wire: "* STATUS \"A B\" ()\r\n", expected: .untagged(.status(mailbox: "A B", items: [:]))),
    .init(wire: "* SEARCH 2 3 6\r\n", expected: .untagged(.search([2, 3, 6], modSeq: nil))),
    .init(wire: "* SEARCH\r\n", expected: .untagged(.search([], modSeq: nil))),
    .init(wire: "* SEARCH 2 5 6 (MODSEQ 917162500)\r\n", expected: .untagged(.search([2, 5, 6], modSeq: 917_162_500))),
    .init(
        wire: "* VANISHED (EARLIER) 41,43:116,118,120:211,214:540\r\n",
        expected: .untagged(.vanished(earlier: true, uids: "41,43:116,118,120:211,214:540"))
    ),
    .init(wire: "* VANISHED 405,407\r\n", expected: .untagged(.vanished(earlier: false, uids: "405,407"))),
    .init(
        wire: "* METADATA \"INBOX\" (/private/comment \"My comment\" /shared/x NIL)\r\n",
        expected: .untagged(
            .metadata(
                mailbox: "INBOX",
                entries: [
                    .init(name: "/private/comment", value: Array("My comment".utf8)),
                    .init(name: "/shared/x", value: nil),
                ]
            )
        )
    ),
    .init(
        wire: "* METADATA INBOX /shared/comment /private/comment\r\n",
        expected: .untagged(
            .metadata(
                mailbox: "INBOX",
                entries: [.init(name: "/shared/comment", value: nil), .init(name: "/private/comment", value: nil)]
            )
        )
    ),
    .init(
        wire: "* METADATA \"\" (/private/vendor/coffer {3}\r\nabc)\r\n",
        expected: .untagged(
            .metadata(mailbox: "", entries: [.init(name: "/private/vendor/coffer", value: Array("abc".utf8))])
        )
    ),
    .init(
        wire: "* 12 FETCH (FLAGS (\\Seen) INTERNALDATE \"17-Jul-1996 02:44:25 -0700\" RFC822.SIZE 4286 UID 27)\r\n",
        expected: .untagged(
            .fetch(
                sequence: 12,
                items: [.flags(["\\Seen"]), .internalDate(secondsSince1970: 837_596_665), .rfc822Size(4286), .uid(27)]
            )
        )
    ),
    .init(
        wire: "* 1 FETCH (UID 4 MODSEQ (12121231000) BODY[] {10}\r\nhello\r\nbye FLAGS ())\r\n",
        expected: .untagged(
            .fetch(
                sequence: 1,
                items: [
                    .uid(4), .modSeq(12_121_231_000), .body(section: "", origin: nil, data: Array("hello\r\nbye".utf8)),
                    .flags([]),
                ]
            )
        )
    ),
    .init(
        wire: "* 2 FETCH (BODY[HEADER.FIELDS (SUBJECT \"X]\")]<0> \"Subject: x\" BODY[TEXT] NIL)\r\n",
        expected: .untagged(
            .fetch(
                sequence: 2,
                items: [
                    .body(section: "HEADER.FIELDS (SUBJECT \"X]\")", origin: 0, data: Array("Subject: x".utf8)),
                    .body(section: "TEXT", origin: nil, data: nil),
                ]
            )
        )
    ),
    .init(
        wire:
            "* 3 FETCH (ENVELOPE (\"date\" {2}\r\nsu ((NIL NIL \"a\" \"b\")) NIL) BODYSTRUCTURE (\"TEXT\" \"PLAIN\" NIL) UID 9)\r\n",
        expected: .untagged(
            .fetch(sequence: 3, items: [.other(name: "ENVELOPE"), .other(name: "BODYSTRUCTURE"), .uid(9)])
        )
    ),
    .init(
        wire: "* 4 FETCH (INTERNALDATE \" 1-Jan-2000 00:00:00 +0000\")\r\n",
        expected: .untagged(.fetch(sequence: 4, items: [.internalDate(secondsSince1970: 946_684_800)]))
    ),
    .init(wire: "* ID (\"name\" \"Dovecot\")\r\n", expected: .untagged(.other(keyword: "ID"))),
    .init(wire: "* NAMESPACE ((\"\" \".\")) NIL NIL\r\n", expected: .untagged(.other(keyword: "NAMESPACE"))),
    .init(wire: "* 5 FETCH ()\r\n", expected: .untagged(.fetch(sequence: 5, items: []))),
    .init(
        wire: "* 6 FETCH (BODY[] {0}\r\n)\r\n",
        expected: .untagged(.fetch(sequence: 6, items: [.body(section: "", origin: nil, data: [])]))
    ),
    .init(
        wire: "* OK [METADATA LONGENTRIES 2199] Some entries too long\r\n",
        expected: .untagged(.condition(status: .ok, code: .metadata("LONGENTRIES 2199"), text: "Some entries too long"))
    ),
]

struct BadResponse: Sendable, CustomTestStringConvertible {
    var wire: String
    var limits: IMAPResponseParser.Limits = .init()
    var check: @Sendable (IMAPError) -> Bool
    var testDescription: String { String(wire.prefix(50)) }
}

func isSyntax(_ error: IMAPError) -> Bool {
    if case .syntax = error { return true }
    return false
}

let badResponses: [BadResponse] = [
    .init(wire: "* 12 FETCH (UID)\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (UID 99999999999)\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (MODSEQ (99999999999999999999999))\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (FLAGS (\\Seen)\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (INTERNALDATE \"32-Jul-1996 02:44:25 -0700\")\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (INTERNALDATE \"17-Foo-1996 02:44:25 -0700\")\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (BODY[] \"unterminated)\r\n", check: isSyntax),
    .init(wire: "* 12 FETCH (BODY[] \"bad \\x escape\")\r\n", check: isSyntax),
    .init(wire: "a1 MAYBE done\r\n", check: isSyntax),
    .init(wire: "a1 OK [UIDNEXT x] y\r\n", check: isSyntax),
    .init(wire: "a1 OK [READ-WRITE y\r\n", check: isSyntax),
    .init(wire: "* OK done\n", check: isSyntax),
    .init(wire: "\r\n", check: isSyntax),
    .init(wire: "* SEARCH 1 x\r\n", check: isSyntax),
    .init(wire: "* LIST (\\X) \"ab\" INBOX\r\n", check: isSyntax),
    .init(wire: "* 1 EXISTS trailing\r\n", check: isSyntax),
    .init(wire: "(((((((((\r\n", check: isSyntax),
    .init(
        wire: "* 1 FETCH (X " + String(repeating: "(", count: 100) + String(repeating: ")", count: 100) + ")\r\n",
        check: { $0 == .nestingTooDeep(limit: 64) }
    ),
    .init(
        wire: "* OK " + String(repeating: "x", count: 200) + "\r\n",
        limits: .init(maxLineLength: 100),
        check: { $0 == .lineTooLong(limit: 100) }
    ),
    .init(
        wire: "* OK " + String(repeating: "x", count: 200),
        limits: .init(maxLineLength: 100),
        check: { $0 == .lineTooLong(limit: 100) }
    ),
    .init(
        // A long line that ends in a bare LF: too long, whether the LF comes in the same read or a later one (the
        // fuzzer found the whole feed calling it a CRLF error while piecewise feeding called it too long).
        wire: "* OK " + String(repeating: "x", count: 200) + "\n",
        limits: .init(maxLineLength: 100),
        check: { $0 == .lineTooLong(limit: 100) }
    ),
    .init(
        wire: "* 1 FETCH (BODY[] {1001}\r\n",
        limits: .init(maxLiteralSize: 1000),
        check: { $0 == .literalTooLarge(size: 1001, limit: 1000) }
    ),
    .init(
        wire: "* 1 FETCH (BODY[] {99999999999999999999999}\r\n",
        check: { if case .literalTooLarge = $0 { true } else { false } }
    ),
    .init(
        wire: "* 1 FETCH (BODY[HEADER] {600}\r\n",
        limits: .init(maxResponseSize: 500),
        check: { $0 == .responseTooLarge(limit: 500) }
    ),
]

@Suite struct IMAPResponseParserTests {
    @Test(arguments: goodResponses)
    func parsesGoodResponse(_ good: GoodResponse) throws {
        #expect(try parseOne(good.wire) == good.expected)
    }

    @Test(arguments: goodResponses)
    func byteByByteFeedingGivesTheSameResult(_ good: GoodResponse) throws {
        #expect(try parseAll(good.wire, byteByByte: true) == [.response(good.expected)])
    }

    @Test(arguments: badResponses)
    func refusesBadResponseWithATypedError(_ bad: BadResponse) {
        for byteByByte in [false, true] {
            #expect {
                _ = try parseAll(bad.wire, limits: bad.limits, byteByByte: byteByByte)
            } throws: { error in
                guard let error = error as? IMAPError else { return false }
                return bad.check(error)
            }
        }
    }

    @Test func parseErrorsCarryNoResponseBytes() {
        let secret = "Subject-Secret-Canary-7731"
        do {
            _ = try parseAll("* 3 FETCH (BODY[] \"\(secret)\r\n")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains(secret))
            #expect(!error.description.contains("Canary"))
        }
    }

    @Test func afterAnErrorTheParserKeepsFailing() throws {
        var parser = IMAPResponseParser()
        parser.feed(Array("* 1 EXISTS x\r\n* 2 EXISTS\r\n".utf8))
        #expect(throws: IMAPError.self) { try parser.next() }
        #expect(throws: IMAPError.self) { try parser.next() }
    }

    @Test func severalResponsesInOneFeedComeOutInOrder() throws {
        let events = try parseAll("* 1 EXISTS\r\n* 0 RECENT\r\n+ go\r\na1 OK done\r\n")
        #expect(
            events == [
                .response(.untagged(.exists(1))), .response(.untagged(.recent(0))), .response(.continuation("go")),
                .response(.tagged(.init(tag: "a1", status: .ok, text: "done"))),
            ]
        )
    }

    @Test func aLargeBodyIsStreamedInChunksNotBuffered() throws {
        let body = String(repeating: "0123456789abcdef", count: 1000) + "\r\n.{3}\r\n"
        let wire = "* 7 FETCH (UID 70 BODY[] {\(body.utf8.count)}\r\n\(body) FLAGS (\\Seen))\r\na9 OK done\r\n"
        let limits = IMAPResponseParser.Limits(maxResponseSize: 4096, streamBodyThreshold: 1024, chunkSize: 1000)
        for byteByByte in [false, true] {
            var parser = IMAPResponseParser(limits: limits)
            var events: [IMAPResponseEvent] = []
            var peak = 0
            for chunk in byteByByte ? Array(wire.utf8).map({ [$0] }) : [Array(wire.utf8)] {
                parser.feed(chunk)
                while let event = try parser.next() {
                    events.append(event)
                    peak = max(peak, parser.bufferedByteCount)
                }
            }
            let chunks = events.compactMap { if case .bodyChunk(let c) = $0 { c } else { nil } }
            #expect(chunks.allSatisfy { $0.count <= 1000 })
            #expect(chunks.flatMap { $0 } == Array(body.utf8))
            let merged = merged(events)
            #expect(
                merged == [
                    .bodyBegin(sequence: 7, section: "", size: body.utf8.count), .bodyChunk(Array(body.utf8)), .bodyEnd,
                    .response(
                        .untagged(
                            .fetch(
                                sequence: 7,
                                items: [
                                    .uid(70), .streamedBody(section: "", origin: nil, size: body.utf8.count),
                                    .flags(["\\Seen"]),
                                ]
                            )
                        )
                    ),
                    .response(.tagged(.init(tag: "a9", status: .ok, text: "done"))),
                ]
            )
            if byteByByte { #expect(peak < 100) }
        }
    }

    @Test func aLargeLiteralOutsideABodyIsRefusedNotStreamed() {
        let limits = IMAPResponseParser.Limits(maxResponseSize: 4096, streamBodyThreshold: 1024)
        #expect(throws: IMAPError.responseTooLarge(limit: 4096)) {
            _ = try parseAll("* 1 FETCH (ENVELOPE {5000}\r\n", limits: limits)
        }
    }

    @Test func aLineOfExactlyTheLimitIsAcceptedWhetherItsCRLFArrivesTogetherOrSplit() throws {
        // Found by reasoning about the fuzzer's invariant: the CR alone must not count against the limit.
        let line = "* OK " + String(repeating: "x", count: 95)
        let limits = IMAPResponseParser.Limits(maxLineLength: 100)
        let expected: [IMAPResponseEvent] = [
            .response(.untagged(.condition(status: .ok, code: nil, text: String(repeating: "x", count: 95))))
        ]
        #expect(try parseAll(line + "\r\n", limits: limits) == expected)
        #expect(try parseAll(line + "\r\n", limits: limits, byteByByte: true) == expected)
    }

    @Test func aPartialResponseWaitsForMoreBytes() throws {
        var parser = IMAPResponseParser()
        parser.feed(Array("* 1 FETCH (BODY[] {10}\r\nhello".utf8))
        #expect(try parser.next() == nil)
        parser.feed(Array("world)\r".utf8))
        #expect(try parser.next() == nil)
        parser.feed([0x0A])
        #expect(
            try parser.next()
                == .response(
                    .untagged(
                        .fetch(sequence: 1, items: [.body(section: "", origin: nil, data: Array("helloworld".utf8))])
                    )
                )
        )
    }
}
