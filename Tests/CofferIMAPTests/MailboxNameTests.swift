import Testing

@testable import CofferIMAP

/// Modified UTF-7 (RFC 3501 5.1.3) both ways, and UID sets.
struct MailboxNameTests {
    @Test(arguments: [
        ("INBOX", "INBOX"),
        ("Entwürfe", "Entw&APw-rfe"),
        ("~peter/mail/台北/日本語", "~peter/mail/&U,BTFw-/&ZeVnLIqe-"),
        ("Tom & Jerry", "Tom &- Jerry"),
        ("😀 mail", "&2D3eAA- mail"),
    ])
    func encodesAndDecodes(name: String, wire: String) {
        #expect(MailboxName.encode(name) == wire)
        #expect(MailboxName.decode(wire) == name)
    }

    @Test(arguments: ["&", "&AB", "&Zz-", "a\u{7F}b", "é", "&2D0-", "&!!-"])
    func refusesWhatIsNotModifiedUTF7(wire: String) {
        #expect(MailboxName.decode(wire) == nil)
    }

    @Test func uidSetsAreCompactAndBounded() {
        #expect(UIDSet.strings([5, 1, 2, 3, 9, 3, 10, 0]) == ["1:3,5,9:10"])
        #expect(UIDSet.strings([UInt32]()) == [])
        #expect(UIDSet.strings([1, 3, 5, 7], maxRanges: 2) == ["1,3", "5,7"])
        #expect(UIDSet.strings([UInt32.max - 1, UInt32.max]) == ["4294967294:4294967295"])
    }

    @Test func uidSetsFromAServerAreParsedStrictly() {
        #expect(UIDSet.ranges("1:3,7,12:9") == [1...3, 7...7, 9...12])
        for bad in ["", "1,", "0", "1:*", "a", "1:2:3", "99999999999", "+1"] { #expect(UIDSet.ranges(bad) == nil) }
    }
}
