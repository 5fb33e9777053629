/// IMAP sequence sets of UIDs (RFC 3501 `sequence-set`): compact text to send, and ranges read from a server.
public enum UIDSet {
    /// The UIDs as compact sets (`1:3,7,9:12`), ascending, each of at most `maxRanges` ranges so that no command
    /// line grows without bound. Duplicates and zero are dropped; an empty input gives no set.
    public static func strings(_ uids: some Sequence<UInt32>, maxRanges: Int = 400) -> [String] {
        let sorted = Set(uids).filter { $0 > 0 }.sorted()
        var ranges: [ClosedRange<UInt32>] = []
        for uid in sorted {
            if let last = ranges.last, last.upperBound < UInt32.max, last.upperBound + 1 == uid {
                ranges[ranges.count - 1] = last.lowerBound...uid
            } else {
                ranges.append(uid...uid)
            }
        }
        let limit = max(1, maxRanges)
        return stride(from: 0, to: ranges.count, by: limit).map { start in
            ranges[start..<min(start + limit, ranges.count)].map { range in
                range.count == 1 ? String(range.lowerBound) : "\(range.lowerBound):\(range.upperBound)"
            }.joined(separator: ",")
        }
    }

    /// The ranges of a set a server sent (VANISHED, SEARCH results), with each range's ends in order; nil when the
    /// text is not a set of numbers (`*` included: a server never sends it in a set of UIDs it reports).
    public static func ranges(_ text: String) -> [ClosedRange<UInt32>]? {
        var result: [ClosedRange<UInt32>] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let ends = part.split(separator: ":", omittingEmptySubsequences: false)
            guard (1...2).contains(ends.count) else { return nil }
            var numbers: [UInt32] = []
            for end in ends {
                guard !end.isEmpty, end.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = UInt32(end),
                    value > 0
                else { return nil }
                numbers.append(value)
            }
            let low = numbers.min() ?? 0
            let high = numbers.max() ?? 0
            result.append(low...high)
        }
        return result
    }
}
