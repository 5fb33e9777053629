import CCofferSystem
import Testing

@testable import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

@Suite("System random")
struct SystemRandomTests {
    @Test("public random values from the pool never repeat")
    func publicValuesAreDistinct() {
        // 30,000 nonces cross about 90 refills of the 4,032-byte pool.
        var seen = Set<[UInt8]>()
        for _ in 0..<30_000 { seen.insert(SystemRandom.publicBytes(12)) }
        #expect(seen.count == 30_000)
        #expect(SystemRandom.publicBytes(64).count == 64)
        #expect(SystemRandom.publicBytes(0).isEmpty)
    }

    @Test("a value of more than 64 bytes is refused by the pool")
    func largeValuesAreRefused() {
        var buffer = [UInt8](repeating: 0, count: 65)
        #expect(coffer_random_public_bytes(&buffer, 65) == -1)
        #expect(buffer.allSatisfy { $0 == 0 })
    }

    #if os(Linux)
    @Test("a forked child does not repeat the nonces its parent draws next")
    func forkedChildRefills() throws {
        _ = SystemRandom.publicBytes(12)  // the pool exists and holds bytes before the fork
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let child = fork()
        if child == 0 {
            // The child makes only async-signal-safe calls and the pool's own.
            var nonce: (UInt64, UInt32) = (0, 0)
            let status: Int32 = withUnsafeMutableBytes(of: &nonce) { raw in
                guard coffer_random_public_bytes(raw.baseAddress, 12) == 0 else { return 1 }
                return write(fds[1], raw.baseAddress, 12) == 12 ? 0 : 1
            }
            _exit(status)
        }
        #expect(child > 0)
        close(fds[1])
        let parentNext = SystemRandom.publicBytes(12)
        var childBytes = [UInt8](repeating: 0, count: 12)
        let got = read(fds[0], &childBytes, 12)
        close(fds[0])
        var status: Int32 = 0
        waitpid(child, &status, 0)
        #expect(got == 12)
        #expect(status == 0)
        // Without MADV_WIPEONFORK the child would hand out exactly the parent's next 12 bytes.
        #expect(childBytes != parentNext)
    }
    #endif
}
