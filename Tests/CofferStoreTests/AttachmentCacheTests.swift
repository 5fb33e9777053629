import CofferAttachments
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Foundation
import Testing

/// A cache in a temporary root with its own Keymaker and clock.
struct CacheWorld {
    let root = TemporaryDirectory(prefix: "coffer-cache-test")
    let clock = TestClock()
    let keymaker: Keymaker

    init() async throws {
        keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
    }

    var cacheFolder: String { "\(root.path)/cache" }
    var previewFolder: String { "\(root.path)/previews" }

    func cache(ttl: Int64 = AttachmentCache.defaultTTLSeconds) throws -> AttachmentCache {
        try AttachmentCache(
            folder: cacheFolder,
            previewFolder: previewFolder,
            keys: keymaker,
            ttlSeconds: ttl,
            clock: clock
        )
    }
}

func pattern(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}

@Suite("Attachment cache")
struct AttachmentCacheTests {
    @Test("put, read and save round-trip; names reveal nothing; save leaves a 0600 file")
    func roundTrip() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        let content = Array("CacheCanaryQx".utf8) + pattern(200_000)
        try await cache.put(content, for: "message:42/attachment:3/invoice.pdf")
        #expect(try await cache.read("message:42/attachment:3/invoice.pdf") == content)
        #expect(try await cache.contains("message:42/attachment:3/invoice.pdf"))
        #expect(try await !cache.contains("other"))
        await #expect(throws: AttachmentError.notCached) { try await cache.read("other") }

        let names = try SecureFile.list(world.cacheFolder).filter { $0 != "previews" }
        #expect(names.count == 1)
        let name = try #require(names.first)
        #expect(name.count == 36 && name.hasSuffix(".cfa"))
        #expect(name.dropLast(4).allSatisfy { $0.isHexDigit })
        #expect(fastScan([Array("CacheCanaryQx".utf8), pattern(64)], under: world.root.path).isEmpty)

        let outside = TemporaryDirectory(prefix: "coffer-cache-save")
        let target = "\(outside.path)/invoice.pdf"
        try await cache.save("message:42/attachment:3/invoice.pdf", to: target)
        #expect(try SecureFile.read(target, maxBytes: 1 << 20) == content)
        var info = stat()
        #expect(stat(target, &info) == 0 && info.st_mode & 0o777 == 0o600)
        await #expect(throws: AttachmentError.invalidArgument("the target file already exists")) {
            try await cache.save("message:42/attachment:3/invoice.pdf", to: target)
        }

        let source = "\(outside.path)/source.bin"
        try SecureFile.writeAtomically(pattern(70_000, seed: 9), to: source)
        try await cache.put(contentsOf: source, for: "streamed")
        #expect(try await cache.read("streamed") == pattern(70_000, seed: 9))
    }

    @Test("entries expire after the TTL on the injected clock and are purged")
    func expiry() async throws {
        let world = try await CacheWorld()
        // The clock moves by hours here: without this the autolock (5 minutes) locks the key on the way, as soon as
        // its timer runs.
        try await world.keymaker.setAutolock(.never)
        let cache = try world.cache(ttl: 3600)
        try await cache.put([1, 2, 3], for: "old")
        world.clock.advance(seconds: 1800)
        try await cache.put([4, 5, 6], for: "new")
        #expect(try cache.purgeExpired() == 0)
        world.clock.advance(seconds: 1801)
        #expect(try await !cache.contains("old"))
        #expect(try await cache.contains("new"))
        #expect(try cache.purgeExpired() == 1)
        #expect(try cache.entryCount() == 1)
        world.clock.advance(seconds: 1800)
        await #expect(throws: AttachmentError.notCached) { try await cache.read("new") }
        #expect(try cache.entryCount() == 0)
        // An entry dated in the future (a clock moved back) counts as expired.
        try await cache.put([7], for: "future")
        world.clock.jumpWallClock(seconds: -3600)
        #expect(try cache.purgeExpired() == 1)
        #expect(throws: AttachmentError.invalidArgument("the time to live must be positive")) {
            try world.cache(ttl: 0)
        }
    }

    @Test("purgeAll at logout deletes every entry and preview, without needing the key")
    func purgeAll() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        for index in 0..<5 { try await cache.put(pattern(1000 + index), for: "entry\(index)") }
        try FileManager.default.createDirectory(atPath: "\(world.previewFolder)/1-x", withIntermediateDirectories: true)
        try await world.keymaker.destroy()
        #expect(try cache.purgeAll() == 5)
        #expect(TemporaryDirectory.files(below: world.root.path).isEmpty)
        #expect(try SecureFile.list(world.previewFolder).isEmpty)
    }

    @Test("preview decrypts into a fresh 0700 folder, runs the viewer and deletes the cleartext when it returns")
    func preview() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        let content = Array("PreviewCanaryQx".utf8) + pattern(5000)
        try await cache.put(content, for: "doc")
        let report = TemporaryDirectory(prefix: "coffer-preview-report")
        let script =
            "stat -c '%a' \"$(dirname \"$0\")\" > \(report.path)/mode; echo \"$0\" > \(report.path)/path; "
            + "cmp -s \"$0\" \(report.path)/expected && echo same > \(report.path)/compare"
        try SecureFile.writeAtomically(content, to: "\(report.path)/expected")
        let status = try await cache.preview(
            "doc",
            suggestedName: "Quarterly report.PDF",
            viewer: ["/bin/sh", "-c", script]
        )
        #expect(status == 0)
        let mode = try String(contentsOfFile: "\(report.path)/mode", encoding: .utf8)
        #expect(mode.trimmingCharacters(in: .whitespacesAndNewlines) == "700")
        let path = try String(contentsOfFile: "\(report.path)/path", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(path.hasPrefix(world.previewFolder + "/"))
        #expect(path.hasSuffix("/attachment.pdf"))
        #expect(try String(contentsOfFile: "\(report.path)/compare", encoding: .utf8).hasPrefix("same"))
        #expect(!SecureFile.exists(path))
        #expect(try SecureFile.list(world.previewFolder).isEmpty)

        // A failing viewer still gets its cleartext deleted; a missing one is an error, also without leftovers.
        #expect(try await cache.preview("doc", suggestedName: nil, viewer: ["/bin/false"]) != 0)
        await #expect(throws: AttachmentError.self) {
            try await cache.preview("doc", suggestedName: nil, viewer: ["/nonexistent/viewer"])
        }
        #expect(try SecureFile.list(world.previewFolder).isEmpty)
        #expect(fastScan([Array("PreviewCanaryQx".utf8)], under: world.root.path).isEmpty)
    }

    @Test("leftovers of a killed process are deleted when a cache is created")
    func leftovers() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        try await cache.put([1, 2, 3], for: "keep")
        // A killed preview (its process is gone) and a half-written cache file.
        let stale = "\(world.previewFolder)/\(Int32.max)-deadbeef"
        try SecureFile.makePrivateDirectory(stale)
        try SecureFile.writeAtomically(Array("leftover cleartext".utf8), to: "\(stale)/attachment.txt")
        try SecureFile.writeAtomically([9, 9], to: "\(world.cacheFolder)/.abc.cfa.tmp-1234")
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -3600)],
            ofItemAtPath: "\(world.cacheFolder)/.abc.cfa.tmp-1234"
        )
        // A live process's preview and its cache write in progress (pid 1 runs) are kept.
        let live = "\(world.previewFolder)/1-cafe"
        try SecureFile.makePrivateDirectory(live)
        let writing = "\(world.cacheFolder)/.def.cfa.tmp-1-cafe"
        try SecureFile.writeAtomically([7, 7], to: writing)

        let reopened = try world.cache()
        #expect(!SecureFile.exists(stale))
        #expect(!SecureFile.exists("\(world.cacheFolder)/.abc.cfa.tmp-1234"))
        #expect(SecureFile.exists(live))
        #expect(SecureFile.exists(writing))
        #expect(try await reopened.read("keep") == [1, 2, 3])
    }

    @Test("a changed or moved cache file fails to decrypt and leaves no partial output")
    func tampering() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        try await cache.put(pattern(150_000), for: "a")
        try await cache.put(pattern(150_000, seed: 3), for: "b")
        let names = try SecureFile.list(world.cacheFolder).filter { $0.hasSuffix(".cfa") }
        #expect(names.count == 2)
        // Flip a byte in the last chunk: the first chunks verify and are written before the failure.
        let first = "\(world.cacheFolder)/\(names[0])"
        var bytes = try #require(try SecureFile.read(first, maxBytes: 1 << 20))
        bytes[bytes.count - 5] ^= 1
        try SecureFile.writeAtomically(bytes, to: first)
        let outside = TemporaryDirectory(prefix: "coffer-cache-tamper")
        var failures = 0
        for key in ["a", "b"] {
            do {
                try await cache.save(key, to: "\(outside.path)/\(key)")
            } catch {
                failures += 1
                #expect(!SecureFile.exists("\(outside.path)/\(key)"))
            }
        }
        #expect(failures == 1)
        #expect(try SecureFile.list(outside.path).count == 1)

        // Renaming one entry's file over the other's: the stream is bound to its name.
        let second = "\(world.cacheFolder)/\(names[1])"
        #expect(rename(second, first) == 0)
        var opened = 0
        for key in ["a", "b"] where (try? await cache.read(key)) != nil { opened += 1 }
        #expect(opened == 0)
    }

    @Test("the cache refuses to work while the Keymaker is locked, but purges")
    func locked() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        try await cache.put([1], for: "x")
        await world.keymaker.lock()
        await #expect(throws: AttachmentError.locked) { try await cache.put([1], for: "y") }
        await #expect(throws: AttachmentError.locked) { try await cache.read("x") }
        await #expect(throws: AttachmentError.locked) {
            try await cache.preview("x", suggestedName: nil, viewer: ["/bin/true"])
        }
        await #expect(throws: AttachmentError.locked) { try await cache.save("x", to: "\(world.root.path)/out") }
        #expect(try cache.purgeExpired() == 0)
        try await world.keymaker.unlock(.none)
        #expect(try await cache.read("x") == [1])
        let errors: [AttachmentError] = [
            .locked, .notCached, .viewerFailed("x"), .invalidArgument("y"), .io(operation: "z", errno: 2),
            .crypto(.authenticationFailed), .keymaker(.locked),
        ]
        // Each a sentence for people, and no two alike.
        for error in errors {
            #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."), "\(error)")
        }
        #expect(Set(errors.map(\.description)).count == errors.count)
    }
}
