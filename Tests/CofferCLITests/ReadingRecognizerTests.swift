import ArgumentParser
import CofferCommandLine
import CofferReading
import CofferSampleMail
import Testing

/// The small `coffer` reads the usual `list`, `search` and `show` command lines itself (`ReadingCommand.recognize`),
/// and ArgumentParser reads every command line in `coffer-core`. Whatever the first reads, the second must read the
/// same way; anything else must be left to the second.
struct ReadingRecognizerTests {
    /// What ArgumentParser makes of `arguments` (the whole argument vector), or nil when it refuses them.
    static func parsed(_ arguments: [String]) -> ReadingCommand? {
        let rest = Array(arguments.dropFirst(2))
        switch arguments[1] {
        case "list": return (try? ListOptions.parse(rest))?.reading
        case "search": return (try? SearchOptions.parse(rest))?.reading
        case "show": return (try? ShowOptions.parse(rest)).flatMap { $0.html ? nil : $0.reading }
        default: return nil
        }
    }

    @Test func theUsualFormsAreReadAsArgumentParserReadsThem() throws {
        let forms: [([String], ReadingCommand)] = [
            (["list"], ReadingCommand(.list(label: nil, limit: 50, offset: 0), home: nil, account: nil)),
            (
                ["list", "--home", "/h", "--limit", "50"],
                ReadingCommand(.list(label: nil, limit: 50, offset: 0), home: "/h", account: nil)
            ),
            (
                ["list", "--label=Inbox", "--offset", "5", "--account", "alice@example.com"],
                ReadingCommand(.list(label: "Inbox", limit: 50, offset: 5), home: nil, account: "alice@example.com")
            ),
            (
                ["search", "--home", "/h", "--limit", "1000", "--offset", "0", "person17"],
                ReadingCommand(.search(words: ["person17"], limit: 1000, offset: 0), home: "/h", account: nil)
            ),
            (
                ["search", "quarterly", "--limit=3", "numbers"],
                ReadingCommand(.search(words: ["quarterly", "numbers"], limit: 3, offset: 0), home: nil, account: nil)
            ),
            (["show", "--home", "/h", "42"], ReadingCommand(.show(id: 42, headers: false), home: "/h", account: nil)),
            (["show", "7", "--headers"], ReadingCommand(.show(id: 7, headers: true), home: nil, account: nil)),
        ]
        for (arguments, expected) in forms {
            let command = ["coffer"] + arguments
            #expect(ReadingCommand.recognize(command) == expected, "\(arguments)")
            #expect(Self.parsed(command) == expected, "\(arguments)")
        }
    }

    @Test func everythingElseIsLeftToCofferCore() throws {
        for arguments in [
            [], ["status"], ["list", "--help"], ["list", "-h"], ["list", "--bogus"], ["list", "word"],
            ["list", "--limit", "5", "--limit", "6"], ["list", "--limit", "five"], ["list", "--limit"],
            ["list", "--limit="], ["list", "--limit", "-5"], ["list", "--pin-stdin"], ["list", "--account", "../x"],
            ["list", "--account="], ["search"], ["search", "--", "-draft"], ["search", "-draft"], ["show"],
            ["show", "1", "2"], ["show", "x"], ["show", "1", "--html"], ["show", "1", "--headers=yes"],
            ["show", "1", "--headers", "--headers"], ["show", "99999999999999999999"], ["show", "-1"],
            ["show", "1", "--viewer", "cat"],
        ] {
            #expect(ReadingCommand.recognize(["coffer"] + arguments) == nil, "\(arguments)")
        }
    }

    /// Command lines made of options, values and words that mean something, nothing or something else to either
    /// reader: every one the small reader takes, ArgumentParser takes the same way.
    @Test func generatedCommandLinesAgreeWithArgumentParser() throws {
        let pieces = [
            "--home", "/h", "--home=/g", "--account", "alice", "--account=bob", "--account=../x", "--label", "Inbox",
            "--label=Work", "--limit", "5", "--limit=7", "--offset", "2", "--offset=x", "-5", "+3", "0", "42",
            "99999999999999999999", "--headers", "--headers=1", "--html", "--pin-stdin", "--viewer", "--help", "-h",
            "--", "-", "word", "", "--limit=", "--unknown", "ünïcode", "--home=", "=",
        ]
        var generator = SplitMix(seed: 0x5EED_C0FF)
        var read = 0
        var agreed = 0
        for _ in 0..<5000 {
            var command = ["coffer", ["list", "search", "show"][Int(generator.next() % 3)]]
            for _ in 0..<Int(generator.next() % 6) {
                command.append(pieces[Int(generator.next() % UInt64(pieces.count))])
            }
            guard let recognized = ReadingCommand.recognize(command) else { continue }
            read += 1
            let parsed = Self.parsed(command)
            #expect(parsed == recognized, "\(command)")
            if parsed == recognized { agreed += 1 }
        }
        // Not vacuous: a good share of the lines are ones the small reader takes.
        #expect(read > 500, "\(read) of 5,000 were read")
        #expect(agreed == read)
    }
}
