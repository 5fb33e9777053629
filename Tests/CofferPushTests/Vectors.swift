import CofferPush
import Foundation
import Testing

/// The RFC known-answer values in Tests/Fixtures/vectors: `name = base64url` lines, `#` comments.
enum Vectors {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/vectors")

    static func load(_ file: String) throws -> [String: String] {
        let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let pair = line.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            values[pair[0].trimmingCharacters(in: .whitespaces)] = pair[1].trimmingCharacters(in: .whitespaces)
        }
        return values
    }

    /// The base64url value `name` of `file`, decoded; fails the test when it is missing.
    static func bytes(_ file: String, _ name: String) throws -> [UInt8] {
        let value = try #require(try load(file)[name], "\(name) missing from \(file)")
        return try #require(Base64URL.decode(value), "\(name) is not base64url")
    }
}
