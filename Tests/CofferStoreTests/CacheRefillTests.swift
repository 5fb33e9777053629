import CofferAttachments
import CofferCrypto
import CofferKeymaker
import CofferTesting
import Crypto
import Foundation
import Testing

/// How a cache file gets damaged on disk.
enum CacheDamage: String, CaseIterable, Sendable {
    /// One byte flipped in the last chunk.
    case flippedByte
    /// Cut in the middle of a chunk.
    case truncated
    /// Emptied.
    case empty
    /// Replaced by the file of another entry (renamed over it).
    case swapped
}

extension CacheWorld {
    /// Replaces a cache file's bytes and dates it from the test clock, so only its content is wrong (not its age).
    func replace(_ path: String, with bytes: [UInt8]) throws {
        try SecureFile.writeAtomically(bytes, to: path)
        let now = Date(timeIntervalSince1970: Double(clock.now().wallSeconds))
        try FileManager.default.setAttributes([.modificationDate: now], ofItemAtPath: path)
    }
}

@Suite("Attachment cache refill")
struct CacheRefillTests {
    @Test(
        "a damaged cache file is dropped and reported missing, so it is filled again",
        arguments: CacheDamage.allCases
    )
    func damagedEntryIsDroppedAndRefilled(damage: CacheDamage) async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        let content = pattern(150_000)
        try await cache.put(content, for: "attachment:1")
        try await cache.put(pattern(1_000, seed: 3), for: "attachment:2")
        #expect(try await cache.containsIntact("attachment:1"))
        let files = try SecureFile.list(world.cacheFolder).filter { $0.hasSuffix(".cfa") }.sorted()
        #expect(files.count == 2)
        // Which file is entry 1's: the one whose removal makes it missing.
        let path = try #require(
            files.map { "\(world.cacheFolder)/\($0)" }.first { path in
                (try? SecureFile.read(path, maxBytes: 1 << 20))?.count ?? 0 > 100_000
            }
        )
        var bytes = try #require(try SecureFile.read(path, maxBytes: 1 << 20))
        switch damage {
        case .flippedByte: bytes[bytes.count - 5] ^= 1
        case .truncated: bytes.removeLast(1000)
        case .empty: bytes = []
        case .swapped:
            let other = try #require(files.map { "\(world.cacheFolder)/\($0)" }.first { $0 != path })
            bytes = try #require(try SecureFile.read(other, maxBytes: 1 << 20))
        }
        try world.replace(path, with: bytes)

        // Still "present" by name and age; the integrity check says otherwise and deletes it.
        #expect(try await cache.contains("attachment:1"))
        #expect(try await !cache.containsIntact("attachment:1"))
        #expect(!SecureFile.exists(path))
        #expect(try await !cache.contains("attachment:1"))
        // Refilled from the intact source, it reads again; the other entry was never touched.
        try await cache.put(content, for: "attachment:1")
        #expect(try await cache.containsIntact("attachment:1"))
        #expect(try await cache.read("attachment:1") == content)
        #expect(try await cache.read("attachment:2") == pattern(1_000, seed: 3))
    }

    @Test("a read or save that fails the check also drops the entry")
    func failedReadDropsTheEntry() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        try await cache.put(pattern(70_000), for: "k")
        let name = try #require(try SecureFile.list(world.cacheFolder).first { $0.hasSuffix(".cfa") })
        let path = "\(world.cacheFolder)/\(name)"
        var bytes = try #require(try SecureFile.read(path, maxBytes: 1 << 20))
        bytes[60] ^= 0x40
        try world.replace(path, with: bytes)
        #expect(try await cache.contains("k"))
        await #expect(throws: AttachmentError.self) { try await cache.read("k") }
        #expect(try await !cache.contains("k"))

        try await cache.put(pattern(70_000), for: "k")
        try world.replace(path, with: bytes)
        #expect(try await cache.contains("k"))
        let outside = TemporaryDirectory(prefix: "coffer-cache-refill")
        await #expect(throws: AttachmentError.self) { try await cache.save("k", to: "\(outside.path)/k") }
        #expect(!SecureFile.exists("\(outside.path)/k"))
        #expect(try await !cache.contains("k"))
    }

    @Test("file names are HMAC-SHA256(MainKey.hashKey(\"attachments.names\"), key), cut to 16 bytes")
    func fileNamesUseTheMainKeyHashKey() async throws {
        let world = try await CacheWorld()
        let cache = try world.cache()
        try await cache.put([1, 2, 3], for: "attachment:77")
        let mainKey = try await world.keymaker.mainKey(for: .userRequest)
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("attachment:77".utf8),
            using: try mainKey.hashKey("attachments.names")
        )
        let expected = Array(mac).prefix(16).map { String(format: "%02x", $0) }.joined() + ".cfa"
        #expect(try SecureFile.list(world.cacheFolder).filter { $0.hasSuffix(".cfa") } == [expected])
    }
}
