import Foundation

/// Locates files under this test target's `Fixtures` folder (read through `#filePath`, not SwiftPM resources).
enum FixtureFiles {
    static func url(_ name: String, file: String = #filePath) -> URL {
        URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)")
    }
}
