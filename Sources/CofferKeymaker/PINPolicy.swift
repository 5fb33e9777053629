import CofferCrypto

/// What a new PIN must be, and what a thief who copies the disk would pay to guess it.
///
/// The rule (docs/THREAT-MODEL.md): a PIN is 6 or more ASCII digits; anything else is a passphrase of 6 or more
/// characters; at most 256 bytes either way. The device secret sits on the same disk as the wraps, so a disk copy
/// lets a thief run the PIN KDF offline, without the 10-attempt limit: only the size of the guess space and the KDF's
/// cost stand in the way.
public enum PINPolicy {
    /// The shortest PIN or passphrase, in characters.
    public static let minimumLength = 6
    /// The longest PIN or passphrase, in bytes of UTF-8.
    public static let maximumBytes = 256

    /// Checks a new PIN against the rule with `minimumLength` characters.
    public static func validate(_ pin: SecretBytes, minimumLength: Int = minimumLength) throws(KeymakerError) {
        let characters = pin.withUnsafeBytes { raw in String(decoding: raw, as: UTF8.self).count }
        guard characters >= minimumLength else { throw .pinTooShort(minimumLength: minimumLength) }
        guard pin.count <= maximumBytes else { throw .pinTooLong(maximumBytes: maximumBytes) }
    }
}

/// The offline guessing cost of one PIN's shape: every PIN of the same length and alphabet, tried at the KDF cost.
public struct PINCostEstimate: Sendable, Equatable {
    /// The alphabet a thief would enumerate.
    public enum Shape: String, Sendable, Equatable {
        /// ASCII digits (10).
        case digits
        /// Lowercase ASCII letters (26).
        case lowercase
        /// ASCII letters (52).
        case letters
        /// ASCII letters and digits (62).
        case lettersAndDigits
        /// Anything else: counted as the 95 printable ASCII characters.
        case printable

        /// Characters in the alphabet.
        public var size: Int {
            switch self {
            case .digits: 10
            case .lowercase: 26
            case .letters: 52
            case .lettersAndDigits: 62
            case .printable: 95
            }
        }
    }

    /// The PIN's alphabet.
    public let shape: Shape
    /// The PIN's length in characters.
    public let length: Int
    /// Seconds one KDF run took on this machine.
    public let secondsPerGuess: Double

    /// The estimate for `pin`, with the KDF cost measured when it was set.
    public init(pin: SecretBytes, secondsPerGuess: Double) {
        let text = pin.withUnsafeBytes { raw in String(decoding: raw, as: UTF8.self) }
        self.init(shape: Self.shape(of: text), length: text.count, secondsPerGuess: secondsPerGuess)
    }

    /// An estimate from its parts.
    public init(shape: Shape, length: Int, secondsPerGuess: Double) {
        self.shape = shape
        self.length = max(0, length)
        self.secondsPerGuess = max(0, secondsPerGuess)
    }

    /// Every PIN of this shape: `size ^ length` (as a `Double`: it can pass `Int.max`).
    public var guessSpace: Double {
        var space = 1.0
        for _ in 0..<length { space *= Double(shape.size) }
        return space
    }

    /// CPU-seconds to try every PIN of this shape.
    public var secondsToTryAll: Double { guessSpace * secondsPerGuess }

    /// For example "A thief with a copy of this disk needs about 6 CPU-days to try every 6-digit PIN (10^6 guesses
    /// at 0.52 s each on this machine)."
    public var sentence: String {
        let what = shape == .digits ? "\(length)-digit PIN" : "\(length)-character passphrase"
        let milliseconds = Int((secondsPerGuess * 1000).rounded())
        return "A thief with a copy of this disk needs about \(Self.duration(secondsToTryAll)) to try every \(what) "
            + "(\(shape.size)^\(length) guesses at \(milliseconds) ms each on this machine)."
    }

    /// Whole CPU-minutes, -hours, -days or -years, whichever reads best.
    static func duration(_ seconds: Double) -> String {
        let units: [(String, Double)] = [("CPU-minute", 60), ("CPU-hour", 3600), ("CPU-day", 86400)]
        for (index, (name, size)) in units.enumerated() {
            let next = index + 1 < units.count ? units[index + 1].1 : 365 * 86400
            if seconds < 2 * next {
                let count = max(1, (seconds / size).rounded())
                return "\(Int(count)) \(name)\(count == 1 ? "" : "s")"
            }
        }
        let years = (seconds / (365 * 86400)).rounded()
        return years < 1e15 ? "\(Int(years)) CPU-years" : "more than 10^15 CPU-years"
    }

    private static func shape(of text: String) -> Shape {
        let scalars = text.unicodeScalars
        let isDigit = { (s: Unicode.Scalar) in ("0"..."9").contains(s) }
        let isLower = { (s: Unicode.Scalar) in ("a"..."z").contains(s) }
        let isLetter = { (s: Unicode.Scalar) in isLower(s) || ("A"..."Z").contains(s) }
        if scalars.allSatisfy(isDigit) { return .digits }
        if scalars.allSatisfy(isLower) { return .lowercase }
        if scalars.allSatisfy(isLetter) { return .letters }
        if scalars.allSatisfy({ isLetter($0) || isDigit($0) }) { return .lettersAndDigits }
        return .printable
    }
}
