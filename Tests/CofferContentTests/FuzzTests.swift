import CofferContent
import CofferHTML
import CofferSampleMail
import Testing

@testable import CofferContent

@Suite("Fuzzing")
struct FuzzTests {
    /// Fragments that tend to break sanitizers: raw-text switches, namespace entries, comment
    /// and CDATA edges, URL schemes, CSS escapes.
    static let fragments: [String] = [
        "<", ">", "\"", "'", "`", "=", "/", "&", "&#", "&#x3c;", "&lt;", "&colon;", "\u{0}", "\u{2028}", "\u{FEFF}",
        "<svg>", "</svg>", "<math>", "<mtext>", "<mglyph>", "<mi>", "<annotation-xml encoding=\"text/html\">",
        "<foreignObject>", "<desc>", "<title>", "</title>", "<style>", "</style>", "<script>", "</script>",
        "<noscript>", "</noscript>", "<textarea>", "</textarea>", "<xmp>", "<noembed>", "<iframe>", "<template>",
        "</template>", "<table>", "<tr>", "<td>", "<form>", "</form>", "<select>", "<option>", "<a href=", "<img src=",
        "<p>", "</p>", "<!--", "-->", "--!>", "<![CDATA[", "]]>", "<?", "<!DOCTYPE html>", "<body ", "<base href=",
        " onerror=alert(1) ", " style=\"", "javascript:", "java\tscript:", "cid:x", "https://leak.example/",
        "//leak.example/", "url(", ")", "\\", "\\65 xpression(", "expression(", "@import ", "{", "}", ";",
        "position:fixed", "behavior:url(x)", "image-set(", "srcset=\"", ", ",
    ]

    private static func mutate(_ input: String, with generator: inout SplitMix) -> String {
        var scalars = Array(input.unicodeScalars)
        let operations = Int.random(in: 1...4, using: &generator)
        for _ in 0..<operations {
            let position = scalars.isEmpty ? 0 : Int.random(in: 0...scalars.count, using: &generator)
            switch Int.random(in: 0..<5, using: &generator) {
            case 0, 1:
                let fragment = fragments.randomElement(using: &generator) ?? "<"
                scalars.insert(contentsOf: fragment.unicodeScalars, at: position)
            case 2:
                guard !scalars.isEmpty, position < scalars.count else { continue }
                let length = Int.random(in: 1...min(16, scalars.count - position), using: &generator)
                scalars.removeSubrange(position..<(position + length))
            case 3:
                guard !scalars.isEmpty, position < scalars.count else { continue }
                let length = Int.random(in: 1...min(32, scalars.count - position), using: &generator)
                let slice = Array(scalars[position..<(position + length)])
                scalars.insert(contentsOf: slice, at: Int.random(in: 0...scalars.count, using: &generator))
            default:
                let value = UInt32.random(in: 0...0x2FF, using: &generator)
                scalars.insert(Unicode.Scalar(value) ?? "?", at: position)
            }
        }
        return String(String.UnicodeScalarView(scalars))
    }

    /// 3,000 mutated inputs (fixed seed): no crash, idempotent, and safe after re-parsing.
    @Test func mutationFuzzSanitizer() {
        var generator = SplitMix(seed: 0xC0FF_EE00_2025)
        let corpus =
            TestSupport.domPurifyCases.map(\.payload) + TestSupport.leakVectors.map(\.payload)
            + AttackTests.mutationCases
        #expect(!corpus.isEmpty)
        let sanitizers = [MailSanitizer(), MailSanitizer().allowingRemoteContent()]
        var failures = 0
        for iteration in 0..<3_000 {
            let seed = corpus[Int.random(in: 0..<corpus.count, using: &generator)]
            var input = Self.mutate(seed, with: &generator)
            if iteration % 7 == 0, let other = corpus.randomElement(using: &generator) {
                input += Self.mutate(other, with: &generator)
            }
            let sanitizer = sanitizers[iteration % 2]
            let once = sanitizer.sanitize(html: input) { _ in EmbeddedAttachment(mediaType: "image/png", data: [1]) }
            let twice = sanitizer.sanitize(html: once.html).html
            let problems = TestSupport.safetyViolations(once.html)
            if once.html != twice || !problems.isEmpty {
                failures += 1
                #expect(once.html == twice, "not idempotent (iteration \(iteration)): \(input)")
                #expect(problems.isEmpty, "unsafe (iteration \(iteration)): \(problems) \(input)")
                if failures > 10 { return }
            }
        }
    }

    private static let cssAlphabet: [String] = [
        "a", "e", "n", "1", "2", ".", "+", "-", "%", "#", "@", "/", "*", "\\", "\\65 ", "\\3c ", "\"", "'", "(", ")",
        "[", "]", "{", "}", ":", ";", ",", " ", "\n", "url(", "<", ">", "!", "\u{0}", "é", "ｅ",
    ]

    /// Adjacent whitespace tokens (split by a dropped comment) as one.
    private static func mergingWhitespace(_ tokens: [CSSToken]) -> [CSSToken] {
        var result: [CSSToken] = []
        for token in tokens {
            if case .whitespace(let next) = token, case .whitespace(let previous)? = result.last {
                result[result.count - 1] = .whitespace(previous + next)
            } else {
                result.append(token)
            }
        }
        return result
    }

    /// Written CSS tokenizes back to the same tokens, for random token soup.
    @Test func cssWriterRoundTripFuzz() {
        var generator = SplitMix(seed: 0x5EED)
        for _ in 0..<3_000 {
            var source = ""
            for _ in 0..<Int.random(in: 1...24, using: &generator) {
                source += Self.cssAlphabet.randomElement(using: &generator) ?? "a"
            }
            let tokens = CSSTokenizer.tokenize(source).filter {
                switch $0 {
                case .badString, .badURL, .cdo, .cdc: return false
                case .delim(let scalar): return scalar != "\\" && scalar != "<"
                default: return true
                }
            }
            // A function token named `url` only exists before a string; the filter never
            // writes it otherwise.
            if tokens.contains(where: {
                if case .function(let name) = $0 { return name.lowercased() == "url" } else { return false }
            }) {
                continue
            }
            var writer = CSSWriter()
            for token in tokens { writer.write(token) }
            #expect(
                Self.mergingWhitespace(CSSTokenizer.tokenize(writer.text)) == Self.mergingWhitespace(tokens),
                "\(source) → \(writer.text)"
            )
        }
    }

    /// Style attributes and sheets from random token soup: filtering twice changes nothing.
    @Test func cssFilterIdempotenceFuzz() {
        var generator = SplitMix(seed: 0xC55)
        for _ in 0..<2_000 {
            var source = ["color", "background", "position", "width", "font-family"].randomElement(using: &generator)!
            source += ":"
            for _ in 0..<Int.random(in: 1...20, using: &generator) {
                source += Self.cssAlphabet.randomElement(using: &generator) ?? "a"
            }
            let html =
                "<style>p{\(source)}</style><p style=\"\(source.replacingOccurrences(of: "\"", with: "&quot;"))\">x</p>"
            let once = MailSanitizer().sanitize(html: html).html
            #expect(MailSanitizer().sanitize(html: once).html == once, "\(source)")
        }
    }
}
