import Foundation

/// A deterministic generator of plausible RFC 5322 messages, for benchmarks, crash tests and canary scans.
///
/// Message `index` always has the same bytes for the same seed. About one message in ten carries a binary
/// attachment, about one in five replies to an earlier one.
public struct SyntheticMail: Sendable {
    /// Canary strings to put into one message, so a scan can prove none of them reaches the disk in clear.
    public struct Canaries: Sendable {
        /// Goes into the subject.
        public var subject: String
        /// Goes into the text body.
        public var body: String
        /// Used as the From address.
        public var fromAddress: String
        /// Used as the To address.
        public var toAddress: String
        /// Goes into an attachment's content (and the attachment's file name).
        public var attachment: [UInt8]

        /// Canaries derived from `index`, unique per message.
        public init(index: Int) {
            subject = "SubjCanary\(index)Zq"
            body = "BodyCanary\(index)Xv"
            fromAddress = "sender.canary\(index)@leak.example"
            toAddress = "rcpt.canary\(index)@leak.example"
            attachment =
                Array("AttachCanary\(index)Wk".utf8) + (0..<48).map { UInt8(truncatingIfNeeded: $0 * 37 + index) }
        }
    }

    private static let vocabulary: [String] = {
        let syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "an", "el", "or", "ub", "qui", "zen", "pra"]
        var words: [String] = []
        for first in syllables {
            for second in syllables { words.append(first + second) }
        }
        return words + ["meeting", "invoice", "project", "report", "budget", "travel", "review", "deadline"]
    }()

    /// The generator's seed.
    public let seed: UInt64

    /// A generator for `seed`.
    public init(seed: UInt64 = 1) { self.seed = seed }

    /// The bytes of message `index`, with `canaries` woven in when given.
    public func message(_ index: Int, canaries: Canaries? = nil, attachment forceAttachment: Bool = false) -> [UInt8] {
        var random = SplitMix(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index))
        func word() -> String { Self.vocabulary[Int(random.next() % UInt64(Self.vocabulary.count))] }
        func words(_ count: Int) -> String { (0..<count).map { _ in word() }.joined(separator: " ") }
        let person = Int(random.next() % 60)
        let fromAddress = canaries?.fromAddress ?? "person\(person)@example\(person % 7).org"
        let toAddress = canaries?.toAddress ?? "me\(index % 3)@coffer.example"
        var subject = words(3 + Int(random.next() % 5))
        if let canaries { subject += " \(canaries.subject)" }
        var body = ""
        for line in 0..<(6 + Int(random.next() % 10)) {
            body += words(8 + Int(random.next() % 6))
            if line == 2, let canaries { body += " \(canaries.body)" }
            body += "\r\n"
        }
        let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(index) * 600 + Double(random.next() % 300))
        var header = "From: Person \(person) <\(fromAddress)>\r\n"
        header += "To: Me <\(toAddress)>\r\n"
        header += "Subject: \(subject)\r\n"
        header += "Date: \(Self.rfc5322(date))\r\n"
        header += "Message-ID: <\(index).\(seed)@synthetic.example>\r\n"
        if index > 0, random.next() % 5 == 0 {
            header += "In-Reply-To: <\(Int(random.next() % UInt64(index))).\(seed)@synthetic.example>\r\n"
        }
        header += "MIME-Version: 1.0\r\n"
        let withAttachment = forceAttachment || canaries != nil || random.next() % 10 == 0
        guard withAttachment else {
            return Array((header + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + body).utf8)
        }
        var content = canaries?.attachment ?? []
        for _ in 0..<(256 + Int(random.next() % 2048)) { content.append(UInt8(truncatingIfNeeded: random.next())) }
        let filename = canaries.map { "\($0.subject).bin" } ?? "file\(index).bin"
        let boundary = "b\(index)x\(seed)"
        var text = header + "Content-Type: multipart/mixed; boundary=\"\(boundary)\"\r\n\r\n"
        text += "--\(boundary)\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\(body)\r\n"
        text += "--\(boundary)\r\nContent-Type: application/octet-stream\r\n"
        text += "Content-Disposition: attachment; filename=\"\(filename)\"\r\n"
        text += "Content-Transfer-Encoding: base64\r\n\r\n"
        let encoded = Data(content).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn])
        text += encoded.replacingOccurrences(of: "\r", with: "\r\n") + "\r\n--\(boundary)--\r\n"
        return Array(text.utf8)
    }

    /// `count` messages from `start` as one mbox file's bytes (mboxrd quoting is not needed: bodies have no `From `
    /// lines).
    public func mbox(count: Int, start: Int = 0) -> [UInt8] {
        var bytes: [UInt8] = []
        for index in start..<(start + count) {
            bytes += Array("From synthetic@example Mon Jan  1 00:00:00 2024\n".utf8)
            bytes += message(index).filter { $0 != 0x0D }
            bytes += [0x0A]
        }
        return bytes
    }

    static func rfc5322(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970)
        let days = seconds / 86_400
        let rest = seconds % 86_400
        // Civil-from-days (Howard Hinnant), for UTC.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        let names = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(day) \(names[month - 1]) \(year) \(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60)) +0000"
    }
}

/// SplitMix64, a small deterministic generator: the same seed gives the same sequence on every machine, so generated
/// corpora (benchmarks, fuzzing, tours) are reproducible.
public struct SplitMix: RandomNumberGenerator, Sendable {
    /// The current state.
    public var state: UInt64

    /// A generator starting from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
