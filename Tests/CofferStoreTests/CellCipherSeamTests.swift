import Foundation
import Testing

/// The `CellCipher` seam exists for `coffer-bench` only: an identity cipher must never reach a real store.
@Suite("Cell cipher seam")
struct CellCipherSeamTests {
    /// The package's `Sources` folder, found from this file's path.
    static var sources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
    }

    @Test("only coffer-bench imports the Benchmark SPI that can replace sealing")
    func onlyTheBenchImportsTheSeam() throws {
        let files = try #require(FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil))
        var importers: [String] = []
        var scanned = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            scanned += 1
            let text = try String(contentsOf: file, encoding: .utf8)
            // CofferContent's Benchmark SPI only adds a check (the sanitizer's forced reparse); the store's replaces
            // sealing.
            if text.contains("@_spi(Benchmark) import CofferStore") {
                importers.append(file.deletingLastPathComponent().lastPathComponent + "/" + file.lastPathComponent)
            }
        }
        #expect(scanned > 50)
        #expect(importers == ["coffer-bench/StoreBenchmark.swift"])
    }
}
