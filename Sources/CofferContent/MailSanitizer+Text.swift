import CofferHTML

extension MailSanitizer {
    /// The plain text of an HTML body, as a reader of the sanitized page would see it: the sanitizer runs first
    /// (scripts, styles, hidden trackers and remote references go), then the text of what is left is laid out with
    /// a line break after each block, a blank line after paragraphs and headings, `- ` before list items, cells
    /// separated by a space, and an image's `alt` text in brackets. No tag, attribute or URL is ever in the result,
    /// and nothing is fetched.
    ///
    /// For a reply that quotes an HTML-only message, or any place that shows such a message as text.
    ///
    /// - Parameter html: The `text/html` part, decoded. Callers bound its size (the sanitizer's cost grows with it).
    public func text(html: String) -> String {
        let sanitized = sanitize(html: html)
        return HTMLTextLayout.text(of: HTMLParser.parseFragment(sanitized.html, context: "div"))
    }
}

/// Lays out the text of a parsed fragment, without recursion (a deep tree is safe).
enum HTMLTextLayout {
    /// Elements after which the text goes on on a new line.
    static let blocks: Set<String> = [
        "address", "article", "aside", "blockquote", "center", "dd", "details", "dialog", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "li", "main", "nav", "ol", "pre",
        "section", "summary", "table", "tbody", "thead", "tfoot", "tr", "ul", "caption",
    ]
    /// Elements followed by a blank line.
    static let paragraphs: Set<String> = ["p", "h1", "h2", "h3", "h4", "h5", "h6", "hr"]
    /// Elements whose content is not text a reader sees.
    static let skipped: Set<String> = ["style", "script", "template", "head", "title", "noscript", "svg", "math"]

    private enum Step {
        case enter(HTMLNode)
        case leave(String)
    }

    static func text(of root: HTMLNode) -> String {
        var writer = Writer()
        var stack: [Step] = root.children.reversed().map { .enter($0) }
        var preformatted = 0
        while let step = stack.popLast() {
            switch step {
            case .leave(let name):
                if name == "pre" { preformatted -= 1 }
                if paragraphs.contains(name) {
                    writer.blankLine()
                } else if blocks.contains(name) {
                    writer.lineBreak()
                } else if name == "td" || name == "th" {
                    writer.space()
                }
            case .enter(let node):
                switch node.kind {
                case .text:
                    writer.append(node.data, preformatted: preformatted > 0)
                case .element:
                    let name = node.name
                    if skipped.contains(name) { continue }
                    if name == "br" {
                        writer.lineBreak(force: true)
                        continue
                    }
                    if name == "img" {
                        if let alt = node.attribute("alt"), !alt.isEmpty {
                            writer.append("[\(alt)]", preformatted: false)
                        }
                        continue
                    }
                    if paragraphs.contains(name) {
                        writer.blankLine()
                        if name == "hr" {
                            writer.append("----", preformatted: false)
                        }
                    } else if blocks.contains(name) {
                        writer.lineBreak()
                    }
                    if name == "li" { writer.append("- ", preformatted: true) }
                    if name == "pre" { preformatted += 1 }
                    stack.append(.leave(name))
                    stack.append(contentsOf: node.children.reversed().map { .enter($0) })
                default:
                    continue
                }
            }
        }
        return writer.finished()
    }

    /// Collects lines: whitespace collapsed outside `pre`, trailing spaces dropped, at most one blank line in a row.
    private struct Writer {
        var lines: [String] = []
        var current = ""
        /// Whether a space is owed before the next word on this line.
        var pendingSpace = false

        mutating func append(_ text: String, preformatted: Bool) {
            if preformatted {
                for (index, piece) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    if index > 0 { lineBreak(force: true) }
                    if pendingSpace && !current.isEmpty { current += " " }
                    pendingSpace = false
                    current += piece
                }
                return
            }
            for scalar in text.unicodeScalars {
                if scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar == "\u{0C}" {
                    pendingSpace = true
                } else {
                    if pendingSpace && !current.isEmpty { current += " " }
                    pendingSpace = false
                    current.unicodeScalars.append(scalar)
                }
            }
        }

        mutating func space() { pendingSpace = true }

        /// Ends the current line; without `force`, only when it holds text.
        mutating func lineBreak(force: Bool = false) {
            if current.isEmpty && !force { return }
            lines.append(current)
            current = ""
            pendingSpace = false
        }

        mutating func blankLine() {
            lineBreak()
            if let last = lines.last, !last.isEmpty { lines.append("") }
        }

        mutating func finished() -> String {
            lineBreak()
            var result: [String] = []
            for line in lines {
                var trimmed = Substring(line)
                while let last = trimmed.last, last == " " || last == "\t" { trimmed.removeLast() }
                if trimmed.isEmpty, result.last?.isEmpty ?? true { continue }
                result.append(String(trimmed))
            }
            while result.last?.isEmpty == true { result.removeLast() }
            return result.joined(separator: "\n")
        }
    }
}
