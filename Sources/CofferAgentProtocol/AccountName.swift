import CofferCrypto
import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The rule for account names, applied in one place by every command and by the agent (which trusts no client)
/// before a name reaches the keychain, a path, a log line or an error sentence.
///
/// A name is 1 to ``maximumBytes`` bytes of UTF-8 in Unicode normalization form C. It may not be `.` or `..`
/// (nor start with `.` at all, so no name reads as a hidden or relative folder), start with `-` (it would read as
/// an option), contain `/` or `\`, or contain a control, format, separator, private-use or unassigned character
/// (which covers NUL, newline, tab, bidirectional overrides and zero-width characters). Spaces are allowed inside a
/// name but not at its start or end, and U+0020 is the only whitespace allowed, so what a person sees is the name.
///
/// The name is never used as a path component: ``folderName(_:)`` gives the per-account folder.
public enum AccountName {
    /// The longest name, in bytes of UTF-8.
    public static let maximumBytes = 128

    /// Checks `name` against the rule above.
    ///
    /// - Throws: ``AppError/invalidAccountName(_:)``, whose sentence never repeats the name.
    public static func validate(_ name: String) throws(AppError) {
        if let problem = problem(name) { throw .invalidAccountName(problem) }
    }

    /// What is wrong with `name`, or `nil` when it is a valid account name.
    public static func problem(_ name: String) -> AccountNameProblem? {
        let bytes = Array(name.utf8)
        if bytes.isEmpty { return .empty }
        if bytes.count > maximumBytes { return .tooLong }
        if name.hasPrefix(".") { return .leadingDot }
        if name.hasPrefix("-") { return .leadingDash }
        if name.contains("/") || name.contains("\\") { return .pathSeparator }
        for scalar in name.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                return .invisibleCharacter
            case .spaceSeparator where scalar != " ":
                return .invisibleCharacter
            default:
                continue
            }
        }
        if name.first == " " || name.last == " " { return .surroundingSpace }
        // The standard library's NFC (the form `String` compares in), not Foundation's: `coffer` links no Foundation,
        // which cost it 3 ms at every start. AccountNameTests checks that both agree.
        if name._nfcCodeUnits != bytes { return .notNormalized }
        return nil
    }

    /// The folder name of `name`'s data under `<data>/mail/`: `a-` and the first 16 bytes of
    /// SHA-256("coffer.account-folder.v1" || 0x00 || UTF-8 of the name) in lowercase hex. Whatever the name holds, the
    /// folder is one fixed-length component of letters and digits (see docs/STORE.md, "Per-account folders").
    public static func folderName(_ name: String) -> String {
        var input = Array("coffer.account-folder.v1".utf8)
        input.append(0)
        input += Array(name.utf8)
        let digest = SHA256.hash(data: input)
        return "a-\(Array(digest.prefix(16)).hexString)"
    }
}

/// Why an account name was refused.
public enum AccountNameProblem: String, Sendable, Equatable, CaseIterable {
    /// The name is empty.
    case empty
    /// The name is longer than ``AccountName/maximumBytes`` bytes of UTF-8.
    case tooLong
    /// The name starts with a dot (this includes `.` and `..`).
    case leadingDot
    /// The name starts with `-`.
    case leadingDash
    /// The name contains `/` or `\`.
    case pathSeparator
    /// The name contains a control, format, separator or unassigned character, or whitespace other than a space.
    case invisibleCharacter
    /// The name starts or ends with a space.
    case surroundingSpace
    /// The name is not in Unicode normalization form C.
    case notNormalized

    /// The reason, for people.
    public var reason: String {
        switch self {
        case .empty: "it is empty"
        case .tooLong: "it is longer than \(AccountName.maximumBytes) bytes of UTF-8"
        case .leadingDot: "it starts with a dot"
        case .leadingDash: "it starts with -"
        case .pathSeparator: "it contains / or \\"
        case .invisibleCharacter: "it contains a control or invisible character, or whitespace other than a space"
        case .surroundingSpace: "it starts or ends with a space"
        case .notNormalized: "it is not in Unicode normalization form C (compose its accents)"
        }
    }
}
