import CofferCrypto
import CofferTesting
import Foundation
import Testing

@Suite struct SecureFileTests {
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

    @Test(arguments: SecureFile.WriteStep.allCases)
    func aCrashLeavesTheOldOrTheNewFileNeverAMix(step: SecureFile.WriteStep) throws {
        let folder = TemporaryDirectory()
        let path = "\(folder.path)/item"
        try SecureFile.writeAtomically(Array(repeating: 1, count: 1000), to: path)
        #expect(throws: CofferCryptoError.self) {
            try SecureFile.writeAtomically(Array(repeating: 2, count: 2000), to: path) { current, target in
                if current == step && target == path { throw CancellationError() }
            }
        }
        let after = try #require(try SecureFile.read(path))
        #expect(after == Array(repeating: 1, count: 1000) || after == Array(repeating: 2, count: 2000))
        try SecureFile.removeTemporaryLeftovers(in: folder.path)
        #expect(try SecureFile.list(folder.path) == ["item"])
    }

    @Test func symlinksAreNotFollowed() throws {
        let folder = TemporaryDirectory()
        try SecureFile.writeAtomically([1], to: "\(folder.path)/target")
        symlink("\(folder.path)/target", "\(folder.path)/link")
        #expect(throws: CofferCryptoError.self) { try SecureFile.read("\(folder.path)/link") }
    }

    /// A process id that is surely not running: a child that has exited and been reaped.
    static func deadProcessID() throws -> Int32 {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        return child.processIdentifier
    }

    @Test func onlyOldLeftoversOfDeadWritersAreRemoved() throws {
        let folder = TemporaryDirectory()
        let dead = try Self.deadProcessID()
        let old = Date().addingTimeInterval(-Double(SecureFile.leftoverMinimumAge) - 60)
        let files: [(name: String, modified: Date?, removed: Bool)] = [
            (".item.tmp-\(dead)-1a2b", old, true),  // a crashed writer's file
            (".item.tmp-\(dead)-3c4d", nil, false),  // dead writer, but fresh: maybe another pid namespace
            (".item.tmp-\(getpid())-5e6f", old, false),  // a live writer (this process) however old
            (".item.tmp-7a8b9c", old, true),  // an older build's name, without a process id
            (".item.tmp-7a8b9d", nil, false),
            ("item", old, false),  // not a temporary file at all
        ]
        for file in files {
            let path = "\(folder.path)/\(file.name)"
            try SecureFile.writeAtomically([1], to: path)
            if let modified = file.modified {
                try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
            }
        }
        try SecureFile.removeTemporaryLeftovers(in: folder.path)
        let left = Set(try SecureFile.list(folder.path))
        #expect(SecureFile.temporaryPath(for: "\(folder.path)/item").hasPrefix("\(folder.path)/.item.tmp-\(getpid())-"))
        for file in files { #expect(left.contains(file.name) == !file.removed, "\(file.name)") }
    }

    @Test func aFolderOpenToOthersIsRefusedNotRepaired() throws {
        let folder = TemporaryDirectory()
        let path = "\(folder.path)/open"
        mkdir(path, 0o755)
        chmod(path, 0o755)
        #expect(throws: CofferCryptoError.self) { try SecureFile.makePrivateDirectory(path) }
        var info = stat()
        stat(path, &info)
        #expect(info.st_mode & 0o777 == 0o755)
        chmod(path, 0o700)
        try SecureFile.makePrivateDirectory(path)
    }

    @Test(.enabled(if: geteuid() == 0, "changing a folder's owner needs root"))
    func aFolderOwnedByAnotherUserIsRefused() throws {
        let folder = TemporaryDirectory()
        let path = "\(folder.path)/theirs"
        mkdir(path, 0o700)
        #expect(chown(path, 65534, 65534) == 0)  // nobody
        do throws(CofferCryptoError) {
            try SecureFile.makePrivateDirectory(path)
            Issue.record("a folder owned by another user was accepted")
        } catch .notPrivate(let where_, let reason) {
            #expect(where_ == path)
            #expect(reason.contains("another user"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}
