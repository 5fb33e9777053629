/// Where a ciphertext belongs: a list of labelled parts (for example `["store", "messages", "subject", "42"]`)
/// that sealing authenticates, so the ciphertext opens only for the same place.
///
/// Parts are length-prefixed when encoded, so `["ab", "c"]` and `["a", "bc"]` are different contexts.
public struct EnvelopeContext: Sendable, Hashable, ExpressibleByArrayLiteral {
    /// The encoded form that is authenticated (see `docs/FORMAT.md`, "Context encoding").
    public let encoded: [UInt8]

    /// Builds a context from string parts.
    public init(_ parts: [String]) {
        var bytes: [UInt8] = []
        for part in parts { Self.append(Array(part.utf8), to: &bytes) }
        encoded = bytes
    }

    /// Builds a context from byte parts.
    public init(byteParts parts: [[UInt8]]) {
        var bytes: [UInt8] = []
        for part in parts { Self.append(part, to: &bytes) }
        encoded = bytes
    }

    /// Builds a context from string parts.
    public init(arrayLiteral parts: String...) { self.init(parts) }

    /// A context with `parts` appended.
    public func appending(_ parts: String...) -> EnvelopeContext {
        var bytes = encoded
        for part in parts { Self.append(Array(part.utf8), to: &bytes) }
        return EnvelopeContext(encoded: bytes)
    }

    private init(encoded: [UInt8]) { self.encoded = encoded }

    private static func append(_ part: [UInt8], to bytes: inout [UInt8]) {
        bytes.appendBigEndian(UInt32(part.count))
        bytes.append(contentsOf: part)
    }
}

extension EnvelopeContext: CustomStringConvertible {
    /// Only the size: contexts can name rows, accounts or files.
    public var description: String { "EnvelopeContext(\(encoded.count) bytes)" }
}
