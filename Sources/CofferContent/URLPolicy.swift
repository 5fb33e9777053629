/// URL checks shared by HTML attributes and CSS.
///
/// A value is first cleaned the way the URL parser cleans it (leading and trailing C0 controls
/// and spaces removed, tabs and newlines removed everywhere); its scheme is then probed on a
/// copy with every control and whitespace character removed, Unicode spaces included, so
/// `java\tscript:`, `&#x2028;javascript:` or `java script:` all probe as `javascript`.
enum URLPolicy {
    /// What a URL value is.
    enum Classification: Equatable {
        /// Empty after cleaning.
        case empty
        /// Only a fragment (`#top`).
        case fragment
        /// A relative reference (no scheme).
        case relative
        /// A network URL: `http:`, `https:` or protocol-relative (`//host`, `\\host`).
        case remote(String)
        /// A `cid:` reference to a part of the message; the content ID without the scheme.
        case cid(String)
        /// A `data:` URL with its media type (lowercased, without parameters).
        case data(mediaType: String)
        /// An inert placeholder this sanitizer writes (`about:invalid`, `about:blank`).
        case inert
        /// Any other scheme (lowercased), including `javascript`, `vbscript`, `file`, `ftp`.
        case other(scheme: String)
    }

    /// Raster image types accepted in `data:` URLs and from `cid:` attachments.
    static let rasterImageTypes: Set<String> = [
        "image/png", "image/gif", "image/jpeg", "image/jpg", "image/pjpeg", "image/webp", "image/bmp",
        "image/avif", "image/apng", "image/x-icon", "image/vnd.microsoft.icon",
    ]

    /// Font types accepted in `data:` URLs.
    static let fontTypes: Set<String> = [
        "font/woff", "font/woff2", "font/ttf", "font/otf", "font/sfnt", "application/font-woff",
        "application/x-font-woff", "application/font-woff2", "application/x-font-ttf", "application/font-sfnt",
        "application/vnd.ms-fontobject",
    ]

    private static func isURLTrimmed(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value <= 0x20
    }

    /// Characters removed before probing the scheme: controls, whitespace and invisible
    /// formatting characters.
    static func isProbeIgnorable(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if value <= 0x20 || (value >= 0x7F && value <= 0xA0) { return true }
        switch value {
        case 0x1680, 0x180E, 0x2000...0x200F, 0x2028...0x202F, 0x205F...0x206F, 0x3000, 0xFEFF: return true
        default: return false
        }
    }

    /// The value the URL parser would see: trimmed of C0 controls and spaces, with ASCII tabs
    /// and newlines removed.
    static func clean(_ value: String) -> String {
        // Most URLs have nothing to remove: no byte at or below a space.
        if !ByteScan.contains(value, byteBelow: 0x21) { return value }
        let scalars = Array(value.unicodeScalars)
        var start = 0
        var end = scalars.count
        while start < end && isURLTrimmed(scalars[start]) { start += 1 }
        while end > start && isURLTrimmed(scalars[end - 1]) { end -= 1 }
        var result = String.UnicodeScalarView()
        for scalar in scalars[start..<end] where scalar != "\t" && scalar != "\n" && scalar != "\r" {
            result.append(scalar)
        }
        return String(result)
    }

    /// Whether the URL starts with `http:` or `https:` (any case) and nothing to ignore: the common case, decided
    /// from its first bytes. Anything else takes the full path of ``classify(_:)``, which gives the same answer.
    private static func isPlainHTTP(_ url: String) -> Bool {
        var index = 0
        var secure = false
        for byte in url.utf8 {
            let lower = byte | 0x20  // ASCII letters only; other bytes fail the comparisons below
            switch index {
            case 0: guard lower == UInt8(ascii: "h") else { return false }
            case 1, 2: guard lower == UInt8(ascii: "t") else { return false }
            case 3: guard lower == UInt8(ascii: "p") else { return false }
            case 4:
                if byte == UInt8(ascii: ":") { return true }
                guard lower == UInt8(ascii: "s") else { return false }
                secure = true
            default: return secure && byte == UInt8(ascii: ":")
            }
            index += 1
        }
        return false
    }

    /// Classifies a cleaned URL value.
    static func classify(_ cleaned: String) -> Classification {
        if isPlainHTTP(cleaned) { return .remote(cleaned) }
        var probe: [Unicode.Scalar] = []
        for scalar in cleaned.unicodeScalars where !isProbeIgnorable(scalar) { probe.append(scalar) }
        if probe.isEmpty { return .empty }
        if probe.count >= 2 && isSlash(probe[0]) && isSlash(probe[1]) {
            return .remote(cleaned)
        }
        if probe[0] == "#" { return .fragment }
        var scheme = ""
        var sawColon = false
        for scalar in probe {
            if scalar == ":" {
                sawColon = true
                break
            }
            if isSlash(scalar) || scalar == "?" || scalar == "#" { break }
            var value = scalar.value
            if value >= 0x41 && value <= 0x5A { value += 0x20 }
            scheme.unicodeScalars.append(Unicode.Scalar(value) ?? scalar)
        }
        guard sawColon else { return .relative }
        let rest = String(String.UnicodeScalarView(probe.dropFirst(scheme.unicodeScalars.count + 1)))
        switch scheme {
        case "http", "https":
            return .remote(cleaned)
        case "cid":
            return .cid(removingPercentEncoding(rest))
        case "data":
            var mediaType = ""
            for scalar in rest.unicodeScalars {
                if scalar == ";" || scalar == "," { break }
                mediaType.unicodeScalars.append(scalar)
            }
            return .data(mediaType: CSSParser.fold(mediaType))
        case "about":
            let target = CSSParser.fold(rest)
            return target == "invalid" || target == "blank" ? .inert : .other(scheme: scheme)
        default:
            return .other(scheme: scheme)
        }
    }

    /// Decodes `%XX` escapes (content IDs in `cid:` URLs are URL-encoded, RFC 2392).
    static func removingPercentEncoding(_ value: String) -> String {
        let bytes = Array(value.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x25, index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }

    /// The host of a remote URL, lowercased, without port or user information.
    static func host(of url: String) -> String {
        // The authority starts after the first pair of slashes or backslashes. Both are ASCII, and no byte of a
        // multi-byte UTF-8 sequence is, so the pair is found on the bytes and ends on a scalar boundary.
        var previous: UInt8 = 0
        var authority: String.Index?
        for index in url.utf8.indices {
            let byte = url.utf8[index]
            if isSlash(byte) && isSlash(previous) {
                authority = url.utf8.index(after: index)
                break
            }
            previous = byte
        }
        guard let authority else { return "" }
        // The host runs to the first `/`, `\`, `?` or `#`, after the last `@`, without the scalars a probe ignores.
        let scalars = url.unicodeScalars
        var start = authority
        var index = authority
        var ignorable = false
        while index < scalars.endIndex {
            let scalar = scalars[index]
            if isSlash(scalar) || scalar == "?" || scalar == "#" { break }
            index = scalars.index(after: index)
            if scalar == "@" {
                start = index
                ignorable = false
            } else if isProbeIgnorable(scalar) {
                ignorable = true
            }
        }
        var result =
            ignorable
            ? String(String.UnicodeScalarView(scalars[start..<index].filter { !isProbeIgnorable($0) }))
            : String(scalars[start..<index])
        // The port, found as the URL parser finds it: the first `:` code point (not a `:` character, which a
        // combining mark after it would make another character).
        if result.utf8.first != UInt8(ascii: "["), let colon = result.utf8.firstIndex(of: UInt8(ascii: ":")) {
            result = String(result[..<colon])
        }
        while result.utf8.last == UInt8(ascii: ".") { result.unicodeScalars.removeLast() }
        return CSSParser.fold(result)
    }

    /// Whether a link target (`a`/`area` `href`) may stay: `http`, `https`, `mailto`, `tel` and
    /// fragments. Relative references are not kept: a message has no base URL, and in a page
    /// opened from a file they would point at local files.
    static func isAllowedLink(_ classification: Classification) -> Bool {
        switch classification {
        case .fragment, .remote: return true
        case .other(let scheme): return scheme == "mailto" || scheme == "tel"
        case .empty, .relative, .cid, .data, .inert: return false
        }
    }

    /// A remote URL made absolute: a protocol-relative `//host` (or `\\host`) gets `https:`, so
    /// that a page opened from a file never turns it into a `file://host` (SMB) reference.
    static func absolute(_ remote: String) -> String {
        var bytes = remote.utf8.makeIterator()
        guard isSlash(bytes.next()), isSlash(bytes.next()) else { return remote }
        // Both are ASCII, so what follows them starts on a scalar boundary.
        return "https://" + remote[remote.utf8.index(remote.startIndex, offsetBy: 2)...]
    }

    /// `/` or `\`, which the URL parser reads alike in a URL with a host.
    private static func isSlash(_ byte: UInt8?) -> Bool { byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") }

    /// The same test for a scalar.
    private static func isSlash(_ scalar: Unicode.Scalar) -> Bool { scalar.isASCII && isSlash(UInt8(scalar.value)) }

    /// Standard base64 with padding.
    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(alphabet[Int(value & 63)])
            index += 3
        }
        let remaining = bytes.count - index
        if remaining == 1 {
            let value = UInt32(bytes[index]) << 16
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(contentsOf: [0x3D, 0x3D])
        } else if remaining == 2 {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(0x3D)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
