import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The binary encoding of a page of message summaries, the payload of an agent `summaries` frame (kind 6): the one
/// reply whose size grows with what the user asks for, and the one the CLI waits on most (`list`, `search`). See
/// `docs/FORMAT.md`, "Summary page v1". JSON cost about 0.6 ms to encode and 0.8 ms to decode for a page of 50 on
/// the development machine, more than the store took to read and open the page.
///
/// Layout, all integers big-endian: the count (`UInt32`), then each summary: `id`, `conversationID` (`Int64`), the
/// date (IEEE 754 binary64, seconds since 2001-01-01T00:00:00Z), `flags`, `size` (`Int64`), the subject (an optional
/// string), the number of `from` addresses (`UInt32`) and each address: name (optional string), address (string),
/// group (optional string). A string is its UTF-8 length (`UInt32`) and bytes; an optional string is a byte 0
/// (absent) or 1 followed by the string.
package enum SummaryPage {
    /// Encodes `summaries`.
    package static func encode(_ summaries: [MessageSummary]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + summaries.count * 128)
        append(UInt32(summaries.count), to: &out)
        for summary in summaries {
            append(UInt64(bitPattern: summary.id), to: &out)
            append(UInt64(bitPattern: summary.conversationID), to: &out)
            append(summary.date.timeIntervalSinceReferenceDate.bitPattern, to: &out)
            append(UInt64(bitPattern: summary.flags.rawValue), to: &out)
            append(UInt64(bitPattern: Int64(summary.size)), to: &out)
            appendOptional(summary.subject, to: &out)
            append(UInt32(summary.from.count), to: &out)
            for address in summary.from {
                appendOptional(address.name, to: &out)
                appendString(address.address, to: &out)
                appendOptional(address.group, to: &out)
            }
        }
        return out
    }

    /// Decodes a page, checking every length against the bytes there are.
    ///
    /// - Throws: ``AppError/malformedMessage`` for a short or overlong payload, a presence byte other than 0 or 1,
    ///   a string that is not UTF-8, or a date that is not a finite number.
    package static func decode(_ bytes: [UInt8]) throws(AppError) -> [MessageSummary] {
        var reader = Reader(bytes: bytes)
        let count = try reader.uint32()
        var summaries: [MessageSummary] = []
        // A summary takes at least 45 bytes, so a hostile count cannot make this reserve more than the bytes allow.
        summaries.reserveCapacity(min(Int(count), bytes.count / 45))
        for _ in 0..<count {
            let id = Int64(bitPattern: try reader.uint64())
            let conversationID = Int64(bitPattern: try reader.uint64())
            let seconds = Double(bitPattern: try reader.uint64())
            guard seconds.isFinite else { throw .malformedMessage }
            let flags = MessageFlags(rawValue: Int64(bitPattern: try reader.uint64()))
            let size = Int(Int64(bitPattern: try reader.uint64()))
            let subject = try reader.optionalString()
            let addressCount = try reader.uint32()
            var from: [MailAddress] = []
            for _ in 0..<addressCount {
                let name = try reader.optionalString()
                let address = try reader.string()
                let group = try reader.optionalString()
                from.append(MailAddress(name: name, address: address, group: group))
            }
            summaries.append(
                MessageSummary(
                    id: id,
                    conversationID: conversationID,
                    date: Date(timeIntervalSinceReferenceDate: seconds),
                    flags: flags,
                    size: size,
                    subject: subject,
                    from: from
                )
            )
        }
        guard reader.isAtEnd else { throw .malformedMessage }
        return summaries
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    private static func appendString(_ value: String, to out: inout [UInt8]) {
        append(UInt32(value.utf8.count), to: &out)
        out.append(contentsOf: value.utf8)
    }

    private static func appendOptional(_ value: String?, to out: inout [UInt8]) {
        guard let value else { return out.append(0) }
        out.append(1)
        appendString(value, to: &out)
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) throws(AppError) -> ArraySlice<UInt8> {
            guard count <= bytes.count - offset else { throw .malformedMessage }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func uint32() throws(AppError) -> UInt32 {
            try take(4).reduce(0) { $0 << 8 | UInt32($1) }
        }

        mutating func uint64() throws(AppError) -> UInt64 {
            try take(8).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func string() throws(AppError) -> String {
            let slice = try take(Int(try uint32()))
            guard let text = String(validating: slice, as: UTF8.self) else { throw .malformedMessage }
            return text
        }

        mutating func optionalString() throws(AppError) -> String? {
            switch try take(1).first {
            case 0: return nil
            case 1: return try string()
            default: throw .malformedMessage
            }
        }
    }
}
