import CofferCrypto
import CofferTesting
import Foundation
import Testing

@Suite(.serialized) struct SecureFileTests {
    @Test func writesArePrivate() throws {
        let folder = TemporaryDirectory()
        let sub = "\(folder.path)/a/b"
        try SecureFile.makePrivateDirectory(sub)
        try SecureFile.writeAtomically([1, 2, 3], to: "\(sub)/file")
        var info = stat()
        stat(sub, &info)
        #expect(info.st_mode & 0o777 == 0o700)
        stat("\(sub)/file", &info)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try SecureFile.read("\(sub)/file") == [1, 2, 3])
        #expect(try SecureFile.read("\(sub)/missing") == nil)
    }

    @Test(arguments: ["written", "synced", "renamed"])
    func aCrashLeavesTheOldOrTheNewFileNeverAMix(step: String) throws {
        let folder = TemporaryDirectory()
        let path = "\(folder.path)/item"
        try SecureFile.writeAtomically(Array(repeating: 1, count: 1000), to: path)
        SecureFile.testCrashPoint = { current, target in
            if current == step && target == path { throw CancellationError() }
        }
        defer { SecureFile.testCrashPoint = nil }
        #expect(throws: CofferCryptoError.self) {
            try SecureFile.writeAtomically(Array(repeating: 2, count: 2000), to: path)
        }
        let after = try #require(try SecureFile.read(path))
        #expect(after == Array(repeating: 1, count: 1000) || after == Array(repeating: 2, count: 2000))
        SecureFile.testCrashPoint = nil
        try SecureFile.removeTemporaryLeftovers(in: folder.path)
        #expect(try SecureFile.list(folder.path) == ["item"])
    }

    @Test func symlinksAreNotFollowed() throws {
        let folder = TemporaryDirectory()
        try SecureFile.writeAtomically([1], to: "\(folder.path)/target")
        symlink("\(folder.path)/target", "\(folder.path)/link")
        #expect(throws: CofferCryptoError.self) { try SecureFile.read("\(folder.path)/link") }
    }
}
