/// Frames a message for SMTP's DATA (RFC 5321 4.5.2), a chunk at a time with constant state.
///
/// Every line ending of the input — CRLF, a bare LF or a bare CR — is written as CRLF, so the output has no bare
/// CR or LF for a server to read as a line end that we did not mean (the "SMTP smuggling" class: `<LF>.<CR><LF>`
/// read as the end of the data by one server and not by the next). A line that starts with `.` gets another `.`
/// in front. ``finish()`` ends the last line if the message did not, then writes the terminating `.<CRLF>`. So no
/// input can end the data early or smuggle a second message.
public struct SMTPDataEncoder: Sendable {
    /// At the start of a line (the next byte gets a dot in front if it is one).
    private var atLineStart = true
    /// The last input byte was a CR whose LF (if any) has not been seen yet.
    private var pendingCR = false

    /// Creates an encoder at the start of the message.
    public init() {}

    /// Appends the framed form of `chunk` to `output`.
    public mutating func encode(_ chunk: some Collection<UInt8>, into output: inout [UInt8]) {
        let done: Void? = chunk.withContiguousStorageIfAvailable { encode(bytes: $0, into: &output) }
        if done == nil { Array(chunk).withUnsafeBufferPointer { encode(bytes: $0, into: &output) } }
    }

    /// Copies each run of bytes up to a line end at once; only line ends and a leading dot are written one by one.
    private mutating func encode(bytes: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + bytes.count + bytes.count / 64 + 4)
        var index = 0
        while index < bytes.count {
            if pendingCR {
                pendingCR = false
                if bytes[index] == 0x0A {  // the LF of a CRLF already written
                    index += 1
                    continue
                }
            }
            var end = index
            while end < bytes.count, bytes[end] != 0x0D, bytes[end] != 0x0A { end += 1 }
            if end > index {
                if atLineStart, bytes[index] == 0x2E { output.append(0x2E) }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<end]))
                atLineStart = false
            }
            guard end < bytes.count else { break }
            // A CRLF, a bare LF or a bare CR: one CRLF. After a CR, an LF at the start of the next input is skipped.
            output.append(0x0D)
            output.append(0x0A)
            atLineStart = true
            pendingCR = bytes[end] == 0x0D
            index = end + 1
        }
    }

    /// Appends the end of the data: a CRLF if the last line is unfinished, then `.<CRLF>`.
    public mutating func finish(into output: inout [UInt8]) {
        if !atLineStart {
            output.append(0x0D)
            output.append(0x0A)
        }
        output.append(contentsOf: [0x2E, 0x0D, 0x0A])
        atLineStart = true
        pendingCR = false
    }
}
