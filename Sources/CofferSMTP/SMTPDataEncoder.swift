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
        output.reserveCapacity(output.count + chunk.count + chunk.count / 64 + 4)
        for byte in chunk {
            if pendingCR {
                pendingCR = false
                if byte == 0x0A { continue }  // the LF of a CRLF already written
            }
            switch byte {
            case 0x0D:
                output.append(0x0D)
                output.append(0x0A)
                pendingCR = true
                atLineStart = true
            case 0x0A:
                output.append(0x0D)
                output.append(0x0A)
                atLineStart = true
            default:
                if atLineStart, byte == 0x2E { output.append(0x2E) }
                output.append(byte)
                atLineStart = false
            }
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
