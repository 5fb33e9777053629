import CofferSampleMail
import Foundation
import Testing

@testable import CofferMIME

/// Random mutations of the generated corpus fed to the parser and the mbox reader: no crash, no hang. The run is
/// bounded by an iteration count and a wall-clock budget, and reproducible from the seed.
@Suite struct FuzzTests {
    static let seed: UInt64 = 0xC0FF_EE00
    static let iterations = 8_000
    static let budget = Duration.seconds(12)

    static let tokens: [[UInt8]] = [
        "\n", "\r\n", "\r", "\0", "--", "--\n", ":", ";", "=?", "?=", "=?utf-8?b?", "=?iso-8859-1?q?", "\"", "<", ">",
        "(", ")", "\\", "=", "=\n", "boundary=", "boundary=\"", "Content-Type: multipart/mixed; boundary=x\n\n--x\n",
        "Content-Type: message/rfc822\n\n", "Content-Transfer-Encoding: base64\n", "charset=x-unknown",
        "filename*0*=utf-8''%", "From ", ">From ", "\n\n", "\t", " ", "\u{FF}", "Date: 99 Foo 99999 99:99:99 +9999\n",
    ].map { Array($0.utf8) }

    static func mutate(_ input: [UInt8], using generator: inout SplitMix) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...8, using: &generator) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<7, using: &generator) {
            case 0 where !bytes.isEmpty:
                bytes[position] = UInt8.random(in: 0...255, using: &generator)
            case 1:
                bytes.insert(contentsOf: tokens.randomElement(using: &generator)!, at: position)
            case 2 where !bytes.isEmpty:
                let length = Int.random(in: 1...min(512, bytes.count - position), using: &generator)
                bytes.removeSubrange(position..<(position + length))
            case 3 where !bytes.isEmpty:
                let length = Int.random(in: 1...min(256, bytes.count - position), using: &generator)
                let target = Int.random(in: 0...bytes.count, using: &generator)
                bytes.insert(contentsOf: Array(bytes[position..<(position + length)]), at: target)
            case 4:
                bytes.removeSubrange(position..<bytes.count)
            case 5 where !bytes.isEmpty:
                bytes[position] = [0x0A, 0x2D, 0x3D, 0x3F, 0x3A, 0x22, 0x00].randomElement(using: &generator)!
            default:
                let token = tokens.randomElement(using: &generator)!
                let count = Int.random(in: 1...200, using: &generator)
                bytes.insert(contentsOf: Array([[UInt8]](repeating: token, count: count).joined()), at: position)
            }
        }
        return bytes
    }

    static func corpus(_ folder: TemporaryFolder) throws -> [[UInt8]] {
        let path = (folder.path as NSString).appendingPathComponent("fuzz-corpus")
        let files = try PythonScripts.makeCorpus(in: path, count: 150, seed: 777)
        return try files.map { try MailSource.readMessageFile(atPath: (path as NSString).appendingPathComponent($0)) }
    }

    @Test func mutatedMessagesNeverCrashTheParser() throws {
        let folder = try TemporaryFolder()
        let seeds = try Self.corpus(folder)
        var generator = SplitMix(seed: Self.seed)
        let clock = ContinuousClock()
        let start = clock.now
        var parsed = 0
        var rejected = 0
        for _ in 0..<Self.iterations where clock.now - start < Self.budget {
            let input = Self.mutate(seeds.randomElement(using: &generator)!, using: &generator)
            do throws(MIMEError) {
                let message = try MIMEParser.parse(input)
                exerciseAccessors(message)
                parsed += 1
            } catch {
                #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."))
                rejected += 1
            }
        }
        print("CofferMIME parser fuzz: \(parsed) parsed, \(rejected) rejected with a typed error")
        #expect(parsed + rejected > 0)
    }

    @Test func mutatedMboxFilesNeverCrashTheReader() throws {
        let folder = try TemporaryFolder()
        let seeds = try Self.corpus(folder)
        var generator = SplitMix(seed: Self.seed ^ 0xFF)
        let clock = ContinuousClock()
        let start = clock.now
        var entries = 0
        for round in 0..<60 where clock.now - start < Self.budget {
            var mbox: [UInt8] = []
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                mbox += Array("From fuzz@example.com Mon Jan  1 00:00:00 2024\n".utf8)
                mbox += seeds.randomElement(using: &generator)!
                mbox += Array("\n".utf8)
            }
            mbox = Self.mutate(mbox, using: &generator)
            let path = try folder.file("fuzz\(round).mbox", mbox)
            let chunk = [1, 7, 64, 4096].randomElement(using: &generator)!
            let limit = [512, 4096, 1 << 20].randomElement(using: &generator)!
            let reader = try MboxReader(path: path, maxMessageBytes: limit, chunkSize: chunk)
            for entry in reader {
                entries += 1
                if case .success(let bytes) = entry.content {
                    #expect(bytes.count <= limit)
                    if let message = try? MIMEParser.parse(bytes) {
                        exerciseAccessors(message)
                    }
                }
            }
            #expect(reader.peakBufferedBytes <= max(chunk, 16) + 4096 + limit + chunk + 1)
        }
        #expect(entries > 0)
    }
}
