#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer target for CofferIMAP's response parser, compiled with the parser's pure-Swift files only:
///
///     out=.build-fuzz; mkdir -p $out/imap-corpus
///     swiftc -O -wmo -parse-as-library -sanitize=fuzzer -swift-version 6 -module-name IMAPFuzzer \
///       Sources/CofferIMAP/{IMAPError,IMAPResponse,IMAPResponseParser,ResponseGrammar,IMAPCommand}.swift \
///       Fuzz/IMAPFuzzer.swift -o $out/IMAPFuzzer
///     $out/IMAPFuzzer $out/imap-corpus -seed=20261122 -runs=200000 -max_total_time=25 -max_len=4096
///
/// For each input the parser (with small limits, so streaming and every limit are reached) is fed the bytes all at
/// once and again in pieces whose sizes come from the input; the harness traps when the two runs disagree (events,
/// with body chunks joined, or the error), when a body chunk exceeds the chunk size, or when the buffered bytes
/// exceed the bounds. libFuzzer reports crashes, hangs and memory blow-ups.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let limits = IMAPResponseParser.Limits(
        maxLineLength: 512,
        maxLiteralSize: 2048,
        maxResponseSize: 1024,
        streamBodyThreshold: 16,
        chunkSize: 7,
        maxDepth: 8
    )
    let whole = run(bytes, limits: limits, pieces: [bytes.count])
    var pieces: [Int] = []
    var seed = UInt32(bytes.first ?? 1) | 1
    var total = 0
    while total < bytes.count {
        seed = seed &* 1_103_515_245 &+ 12345
        let piece = Int(seed >> 16) % 9 + 1
        pieces.append(piece)
        total += piece
    }
    let split = run(bytes, limits: limits, pieces: pieces)
    if whole.events != split.events || whole.error != split.error {
        fail("feeding in pieces changed the result", input: bytes)
    }
    return 0
}

private func run(
    _ bytes: [UInt8],
    limits: IMAPResponseParser.Limits,
    pieces: [Int]
) -> (events: [IMAPResponseEvent], error: IMAPError?) {
    var parser = IMAPResponseParser(limits: limits)
    var events: [IMAPResponseEvent] = []
    var offset = 0
    for piece in pieces {
        let end = min(bytes.count, offset + piece)
        parser.feed(bytes[offset..<end])
        offset = end
        do {
            while let event = try parser.next() {
                if case .bodyChunk(let chunk) = event {
                    if chunk.isEmpty || chunk.count > limits.chunkSize { fail("bad chunk size", input: bytes) }
                    if case .bodyChunk(let previous)? = events.last {
                        events[events.count - 1] = .bodyChunk(previous + chunk)
                        continue
                    }
                }
                events.append(event)
            }
        } catch {
            // Bound: never more than one response plus one line plus the unread piece.
            return (events, error)
        }
        if parser.bufferedByteCount > limits.maxResponseSize + limits.maxLineLength + 16 {
            fail("buffered bytes beyond the bounds", input: bytes)
        }
    }
    return (events, nil)
}

private func fail(_ reason: String, input: [UInt8]) -> Never {
    var message = "IMAPFuzzer: \(reason)\n--- input (\(input.count) bytes)\n"
    message += String(decoding: input.prefix(2000), as: UTF8.self)
    message += "\n"
    message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    abort()
}
