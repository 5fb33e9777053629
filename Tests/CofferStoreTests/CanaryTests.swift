import CofferAttachments
import CofferCrypto
import CofferKeymaker
import CofferSampleMail
import CofferTesting
import Foundation
import Testing

@testable import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// Files under `root` that contain any needle.
func fastScan(_ needles: [[UInt8]], under root: String) -> [(file: String, needle: Int)] {
    CanaryScanner.occurrences(of: needles, under: [root])
}

@Suite("Canary scan")
struct CanaryTests {
    @Test("no canary, address, attachment byte sequence or key reaches any file of the store or the cache")
    func canaryScan() async throws {
        let world = try await StoreWorld()
        let generator = SyntheticMail(seed: 11)
        var messages: [RawMessage] = []
        var needles: [[UInt8]] = []
        for index in 0..<120 {
            if index % 6 == 0 {
                let canaries = SyntheticMail.Canaries(index: index)
                messages.append(RawMessage(bytes: generator.message(index, canaries: canaries)))
                needles += [canaries.subject, canaries.body, canaries.fromAddress, canaries.toAddress].map {
                    Array($0.utf8)
                }
                needles.append(canaries.attachment)
                needles.append(Array(canaries.attachment.suffix(40)))
            } else {
                messages.append(RawMessage(bytes: generator.message(index)))
            }
        }
        // Ordinary addresses and words of the generated mail must not appear either.
        needles += ["person1@example1.org", "me0@coffer.example", "Inbox", "Person 1"].map { Array($0.utf8) }
        needles.append(try await world.keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) })

        for start in stride(from: 0, to: messages.count, by: 40) {
            _ = try await world.store.importMessages(Array(messages[start..<(start + 40)]))
        }
        let cache = try AttachmentCache(
            folder: "\(world.root.path)/cache",
            previewFolder: "\(world.root.path)/previews",
            keys: world.keymaker,
            clock: world.clock
        )
        for summary in try await world.store.search(SyntheticMail.Canaries(index: 0).subject) {
            for attachment in try await world.store.attachments(of: summary.id) {
                let content = try await world.store.attachmentContent(attachment.id)
                try await cache.put(content.content, for: "attachment:\(attachment.id)")
                try await cache.preview("attachment:\(attachment.id)", suggestedName: "x.bin", viewer: ["/bin/true"])
            }
        }
        #expect(try cache.entryCount() >= 1)
        // Exercise reads and settings too, so their pages reach the WAL.
        _ = try await world.store.list(limit: 100)
        try await world.store.updateSettings(StoreSettings(remoteImages: true, stripMetadata: true))
        #expect(try await world.store.search(SyntheticMail.Canaries(index: 6).subject).count == 1)

        let wal = "\(world.databasePath)-wal"
        #expect((try SecureFile.read(wal, maxBytes: 1 << 30)?.count ?? 0) > 0, "the scan must cover a live WAL")
        #expect(fastScan(needles, under: world.root.path).isEmpty)

        // After a checkpoint everything sits in the main file; scan again.
        try world.store.close()
        #expect(fastScan(needles, under: world.root.path).isEmpty)
        #expect(CanaryScanner.occurrences(of: Array(needles.prefix(12)), under: ["\(world.root.path)/store"]).isEmpty)
        // The scanner itself works: the generated mbox in clear does contain the needles.
        let clear = TemporaryDirectory(prefix: "coffer-canary-control")
        try SecureFile.writeAtomically(messages[0].bytes, to: "\(clear.path)/control.eml")
        #expect(!fastScan(needles, under: clear.path).isEmpty)
        #expect(!CanaryScanner.occurrences(of: Array(needles.prefix(4)), under: [clear.path]).isEmpty)
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/previews").isEmpty)
    }
}
