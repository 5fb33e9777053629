import CofferCrypto

/// The sealing step of one store cell: turns a cell's plaintext (``CellWriter``) into the bytes stored in its
/// column, and back, under the column's key and the cell's context (`docs/STORE.md`, "Sealed cells").
///
/// The store always uses sealed envelopes. The seam exists so that `coffer-bench` can run the very same schema,
/// import, query and search-token code with sealing replaced by identity, and so measure only what sealing costs.
/// It is `@_spi(Benchmark)`: nothing outside the benchmark imports it, and the CLI never does.
@_spi(Benchmark) public protocol CellCipher: Sendable {
    /// The stored bytes of a cell whose plaintext is `plaintext`.
    ///
    /// - Parameters:
    ///   - plaintext: The padded cell plaintext.
    ///   - key: The column's key.
    ///   - context: The cell's context (column, row and any extra part).
    func seal(
        _ plaintext: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError)
        -> [UInt8]

    /// The plaintext of a stored cell, or `nil` when it does not open for this key and context.
    ///
    /// - Parameters:
    ///   - sealed: The stored bytes.
    ///   - key: The column's key.
    ///   - context: The cell's context.
    func open(_ sealed: [UInt8], with key: EnvelopeKey, context: EnvelopeContext) -> [UInt8]?
}

/// The production cell cipher: a sealed envelope v1 (AES-256-GCM) per cell.
struct EnvelopeCellCipher: CellCipher {
    func seal(
        _ plaintext: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError)
        -> [UInt8]
    {
        try Envelope.seal(plaintext, with: key, context: context)
    }

    func open(_ sealed: [UInt8], with key: EnvelopeKey, context: EnvelopeContext) -> [UInt8]? {
        try? Envelope.open(sealed, with: key, context: context)
    }
}
