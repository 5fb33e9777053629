import CofferHTML

/// The email HTML sanitizer.
///
/// The body is parsed as a document with ``CofferHTML/HTMLParser`` (so `<style>` in `<head>` is
/// found), a new tree is built from what the mail profile keeps, and the result is serialized.
/// Remote resources are blocked or loaded according to ``Options``; `cid:` references are
/// embedded as `data:` URLs through the caller's resolver.
///
/// The output is a fixed point: `sanitize(sanitize(x).html).html == sanitize(x).html`, and the
/// tree a browser builds from the output is the tree that was checked. ``ParseStability`` proves
/// that for most mail in one walk of the output tree; when it cannot, the output is parsed and
/// sanitized again until the serialization stops changing (at most three rounds, else only the
/// text is kept).
///
/// See `docs/SANITIZER.md` for the profile.
public struct MailSanitizer: Sendable {
    /// Sanitizer settings.
    public struct Options: Sendable, Hashable {
        /// Whether remote content loads (default: blocked).
        public var remoteContent: RemoteContentMode
        /// Whether tracking pixels stay blocked while remote content is allowed (default: on).
        public var blockTrackers: Bool
        /// Remote URLs the user chose to load although remote content is blocked (exact cleaned
        /// URLs, as reported in ``RemoteResource/url``).
        public var allowedRemoteURLs: Set<String>
        /// Hosts whose images count as trackers; subdomains match too.
        public var trackerHosts: Set<String>

        /// Creates options.
        public init(
            remoteContent: RemoteContentMode = .block,
            blockTrackers: Bool = true,
            allowedRemoteURLs: Set<String> = [],
            trackerHosts: Set<String> = Options.defaultTrackerHosts
        ) {
            self.remoteContent = remoteContent
            self.blockTrackers = blockTrackers
            self.allowedRemoteURLs = allowedRemoteURLs
            self.trackerHosts = trackerHosts
        }

        /// Well-known hosts of e-mail open tracking and analytics.
        public static let defaultTrackerHosts: Set<String> = [
            "google-analytics.com", "doubleclick.net", "googletagmanager.com", "mailtrack.io", "mailtrack.com",
            "list-manage.com", "mandrillapp.com", "mcsv.net", "sendgrid.net", "sparkpostmail.com",
            "exacttarget.com", "hubspotlinks.com", "hubspotemail.net", "mixpanel.com", "mailchimp.com",
            "email.mg", "mailgun.org", "mailgun.net", "mktoresp.com", "mkt.com", "pardot.com", "intercom-mail.com",
            "intercom.io", "customeriomail.com", "track.customer.io", "yesware.com", "getnotify.com",
            "bananatag.com", "streak.com", "mailstat.us", "cirrusinsight.com", "boomerangapp.com", "superhuman.com",
            "salesloft.com", "outreach.io", "mixmax.com", "litmus.com", "emltrk.com", "returnpath.net",
            "pixel.wp.com", "facebook.com", "t.co", "analytics.twitter.com", "bat.bing.com", "ct.sendgrid.net",
            "links.iterable.com", "awstrack.me", "r.mailjet.com", "klaviyo.com", "trk.klclick.com",
            "ad.doubleclick.net",
        ]
    }

    /// The settings.
    public var options: Options

    /// Creates a sanitizer.
    public init(options: Options = Options()) {
        self.options = options
    }

    /// A sanitizer like this one that also loads `resources` (the user's "show images"
    /// for particular items, or for all of ``SanitizedMessage/blockedRemoteContent``).
    public func restoringRemoteContent(_ resources: [RemoteResource]) -> MailSanitizer {
        var copy = self
        copy.options.allowedRemoteURLs.formUnion(resources.map(\.url))
        return copy
    }

    /// A sanitizer like this one with remote content allowed ("auto show images"); tracking
    /// pixels stay blocked unless ``Options/blockTrackers`` is off.
    public func allowingRemoteContent() -> MailSanitizer {
        var copy = self
        copy.options.remoteContent = .allow
        return copy
    }

    /// Sanitizes an HTML body given as UTF-8.
    ///
    /// - Parameters:
    ///   - html: The `text/html` part, decoded to UTF-8.
    ///   - cidResolver: Finds the message's own parts for `cid:` URLs.
    public func sanitize(html: [UInt8], cidResolver: CIDResolver? = nil) -> SanitizedMessage {
        sanitize(html: html, cidResolver: cidResolver, reparseAlways: false)
    }

    /// ``sanitize(html:cidResolver:)`` with the reparse check run whether or not ``ParseStability`` proves the output
    /// stable, so that `coffer-bench` can show what the proof saves.
    @_spi(Benchmark) public func sanitizeReparsingAlways(html: [UInt8]) -> SanitizedMessage {
        sanitize(html: html, cidResolver: nil, reparseAlways: true)
    }

    /// Whether ``ParseStability`` proves the first pass's output of `html` stable (so that no reparse runs), for
    /// `coffer-bench` to report how often the reparse is needed.
    @_spi(Benchmark) public func stabilityProofHolds(html: [UInt8]) -> Bool {
        let gate = ResourceGate(options: options, cidResolver: nil)
        return ParseStability.holds(for: SanitizerPass(gate: gate).run(HTMLParser.parseDocument(html)))
    }

    private func sanitize(html: [UInt8], cidResolver: CIDResolver?, reparseAlways: Bool) -> SanitizedMessage {
        let gate = ResourceGate(options: options, cidResolver: cidResolver)
        // Inline styles that touch no URL filter the same whatever the gate, so every pass shares one memo.
        let styles = SanitizerPass.StyleMemo()
        let first = SanitizerPass(gate: gate, styles: styles).run(HTMLParser.parseDocument(html))
        var output = HTMLSerializer.serialize(first)
        // Most mail is proven stable in one walk of the output; the rest is parsed and sanitized again until it
        // settles.
        var stable = !reparseAlways && ParseStability.holds(for: first)
        for _ in 0..<(stable ? 0 : 3) {
            let verify = SanitizerPass(gate: ResourceGate(options: options, cidResolver: nil), styles: styles)
            let again = HTMLSerializer.serialize(verify.run(HTMLParser.parseDocument(output)))
            if again == output {
                stable = true
                break
            }
            output = again
        }
        if !stable { output = Self.textOnly(output) }
        return SanitizedMessage(
            html: output,
            blockedRemoteContent: gate.blocked,
            loadedRemoteContent: stable ? gate.loaded : [],
            embeddedImageCount: gate.embeddedCount,
            missingContentIDs: gate.missingContentIDs
        )
    }

    /// Sanitizes an HTML body given as a string.
    public func sanitize(html: String, cidResolver: CIDResolver? = nil) -> SanitizedMessage {
        sanitize(html: Array(html.utf8), cidResolver: cidResolver)
    }

    /// The last resort when the markup does not settle: its text, escaped.
    private static func textOnly(_ html: String) -> String {
        let fragment = HTMLParser.parseFragment(html, context: "div")
        var text = Substring(fragment.textContent)
        while let first = text.unicodeScalars.first, SanitizerPass.isASCIIWhitespace(first) {
            text = text.dropFirst()
        }
        let node = HTMLNode.documentFragment()
        node.appendChild(HTMLNode.text(String(text)))
        return HTMLSerializer.serialize(node)
    }
}

/// One sanitizing pass over a parsed document: builds a new fragment from what the profile
/// keeps. Iterative, so arbitrarily deep input is safe.
struct SanitizerPass {
    let gate: ResourceGate
    let css: CSSFilter
    let styles: StyleMemo

    init(gate: ResourceGate, styles: StyleMemo = StyleMemo()) {
        self.gate = gate
        self.css = CSSFilter(gate: gate)
        self.styles = styles
    }

    /// Style attributes already filtered in this sanitize call. Mail repeats the same inline style on many elements, so
    /// each distinct one is parsed once; a style that refers to a URL is never reused (its resource must be counted
    /// each time it occurs).
    final class StyleMemo {
        struct Key: Hashable {
            var text: String
            var element: String
            var hidden: Bool
        }
        var results: [Key: String?] = [:]
        var hidden: [String: Bool] = [:]
    }

    func styleLooksHidden(_ style: String) -> Bool {
        if let known = styles.hidden[style] { return known }
        let result = CSSFilter.looksHidden(style: style)
        styles.hidden[style] = result
        return result
    }

    func filterStyle(_ text: String, element: String, hidden: Bool) -> String? {
        let key = StyleMemo.Key(text: text, element: element, hidden: hidden)
        if let known = styles.results[key] { return known }
        let decisions = gate.decisionCount
        let result = css.filterStyleAttribute(text, element: element, looksHidden: hidden)
        if gate.decisionCount == decisions { styles.results[key] = .some(result) }
        return result
    }

    static func isASCIIWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar == "\u{0C}"
    }

    func run(_ document: HTMLNode) -> HTMLTree {
        var output = HTMLTree()
        var head: HTMLNode?
        var body: HTMLNode?
        for child in document.children where child.isElement("html") {
            for part in child.children {
                if part.isElement("head") && head == nil { head = part }
                if part.isElement("body") && body == nil { body = part }
            }
        }
        if let head {
            for child in head.children where child.isElement("style") {
                appendFilteredStyle(child, to: HTMLTree.root, in: &output)
            }
        }
        guard let body else { return output }
        var container = HTMLTree.root
        if let style = bodyStyle(body) {
            container = output.appendElement(
                "div",
                tag: .div,
                attributes: [
                    HTMLAttribute(name: "class", value: "coffer-body"), HTMLAttribute(name: "style", value: style),
                ],
                to: HTMLTree.root
            )
        }
        let preformatted = walk(body, into: container, of: &output)
        // The parser drops a newline right after `<pre>`, and the serializer does not write one
        // back, so a text that starts with a newline needs one more to survive a reparse.
        for element in preformatted {
            let text = output.firstChild(element)
            if text != HTMLTree.none, output.kind(text) == .text, output.text(text).hasPrefix("\n") {
                output.setText("\n" + output.text(text), of: text)
            }
        }
        trimLeadingWhitespace(&output)
        return output
    }

    /// The document parser drops whitespace before the body's first content, so the output
    /// must not start with any (else a second pass would differ).
    private func trimLeadingWhitespace(_ output: inout HTMLTree) {
        while true {
            var node = output.firstChild(HTMLTree.root)
            while node != HTMLTree.none && output.kind(node) == .element && output.tag(node) == .style {
                node = output.nextSibling(node)
            }
            guard node != HTMLTree.none, output.kind(node) == .text else { return }
            var text = Substring(output.text(node))
            while let first = text.unicodeScalars.first, Self.isASCIIWhitespace(first) {
                text = text.dropFirst()
            }
            if text.isEmpty {
                output.remove(node)
            } else {
                output.setText(String(text), of: node)
                return
            }
        }
    }

    /// Appends `element` (a `<style>`) to `parent` with its sheet filtered, unless nothing is left of it.
    private func appendFilteredStyle(_ element: HTMLNode, to parent: HTMLTree.NodeID, in output: inout HTMLTree) {
        let sheet = css.filterStyleSheet(element.textContent)
        if sheet.utf8.allSatisfy({ " \t\n".utf8.contains($0) }) { return }
        let style = output.appendElement("style", tag: .style, attributes: [], to: parent)
        output.appendText(sheet, to: style)
    }

    /// `body` presentational attributes as a declaration list for a wrapper.
    private func bodyStyle(_ body: HTMLNode) -> String? {
        var declarations = ""
        if let color = body.attribute("bgcolor"), Self.isSimpleColor(color) {
            declarations += "background-color: \(color); "
        }
        if let color = body.attribute("text"), Self.isSimpleColor(color) {
            declarations += "color: \(color); "
        }
        if let image = body.attribute("background") {
            declarations += "background-image: url("
            CSSWriter.appendString(image, to: &declarations)
            declarations += "); "
        }
        if let style = body.attribute("style") { declarations += style }
        if declarations.isEmpty { return nil }
        return css.filterStyleAttribute(declarations, element: "body")
    }

    private static func isSimpleColor(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 32
            && value.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x23
            }
    }

    /// Copies what the profile keeps; returns the kept `pre` elements.
    private func walk(
        _ root: HTMLNode,
        into container: HTMLTree.NodeID,
        of output: inout HTMLTree
    ) -> [HTMLTree.NodeID] {
        var preformatted: [HTMLTree.NodeID] = []
        var names = SeenNames()
        var stack: [(HTMLNode, HTMLTree.NodeID)] = root.children.reversed().map { ($0, container) }
        while let (node, parent) = stack.popLast() {
            switch node.kind {
            case .text:
                let last = output.lastChild(parent)
                if last != HTMLTree.none && output.kind(last) == .text {
                    output.appendData(node.data, to: last)
                } else {
                    output.appendText(node.data, to: parent)
                }
            case .element:
                if node.isElement(.style) {
                    appendFilteredStyle(node, to: parent, in: &output)
                    continue
                }
                let policy = MailProfile.policy(for: HTMLNodeName(name: node.name, isHTML: node.namespace == .html))
                switch policy.action {
                case .drop:
                    continue
                case .unwrap:
                    for child in node.children.reversed() { stack.append((child, parent)) }
                case .keep:
                    let element = output.appendElement(node.name, tag: node.id, to: parent)
                    filterAttributes(of: node, roles: policy.attributes, into: &output, element: element, names: &names)
                    if node.id == .pre { preformatted.append(element) }
                    for child in node.children.reversed() { stack.append((child, element)) }
                }
            case .comment, .doctype, .document, .documentFragment:
                continue
            }
        }
        return preformatted
    }

    // MARK: Attributes

    private static func pixelSize(_ value: String?) -> Int? {
        guard let value else { return nil }
        var number = 0
        var digits = 0
        for byte in value.utf8 {
            if byte == 0x20 && digits == 0 { continue }
            guard byte >= 0x30 && byte <= 0x39 else { break }
            number = min(number * 10 + Int(byte - 0x30), 100_000)
            digits += 1
        }
        return digits == 0 ? nil : number
    }

    /// Whether an image is a tracking-pixel candidate: hidden, or at most 1×1 pixels.
    private func looksHidden(_ node: HTMLNode) -> Bool {
        if node.attribute("hidden") != nil { return true }
        if let style = node.attribute("style"), styleLooksHidden(style) { return true }
        let width = Self.pixelSize(node.attribute("width"))
        let height = Self.pixelSize(node.attribute("height"))
        if width == 0 || height == 0 { return true }
        if width == nil && height == nil { return false }
        return (width ?? 1) <= 1 && (height ?? 1) <= 1
    }

    private func resourceKind(for node: HTMLNode, attribute: String) -> RemoteResource.Kind {
        switch (node.name, attribute) {
        case ("img", _): return .image
        case ("video", "poster"): return .poster
        case ("video", _), ("audio", _): return .media
        case ("source", _):
            if let parent = node.parent, parent.isElement("video") || parent.isElement("audio") { return .media }
            return .image
        default: return .backgroundImage
        }
    }

    /// `data-coffer-blocked-` and the name of a resource attribute: a literal for the three there are, so that
    /// marking a blocked image allocates no name.
    private static func blockedAttributeName(_ key: String) -> String {
        switch key {
        case "src": return "data-coffer-blocked-src"
        case "background": return "data-coffer-blocked-background"
        case "poster": return "data-coffer-blocked-poster"
        default: return "data-coffer-blocked-" + key
        }
    }

    /// Gives `element`, the copy of `node` just appended to `output`, the attributes of `node` that the profile keeps,
    /// checked and rewritten; `roles` is its ``MailProfile/ElementPolicy/attributes``. `names` is scratch storage,
    /// reused from element to element.
    func filterAttributes(
        of node: HTMLNode,
        roles: NameTable<MailProfile.AttributeRole>,
        into output: inout HTMLTree,
        element: HTMLTree.NodeID,
        names seen: inout SeenNames
    ) {
        let name = node.name
        let hidden = name == "img" && looksHidden(node)
        let attributes = node.attributes
        func keep(_ attribute: HTMLAttribute) { output.appendAttribute(attribute, to: element) }
        var linkTarget: String?
        // The tokenizer already drops repeated attributes; this guards a tree built otherwise, without hashing
        // the few names an element has.
        let checkRepeats = attributes.count > 1
        if checkRepeats { seen.removeAll() }
        for attribute in attributes {
            guard attribute.namespace == nil, attribute.prefix == nil else { continue }
            let key = attribute.name
            if checkRepeats { guard seen.insert(key) else { continue } }
            guard let role = roles[key] else {
                if MailProfile.isCustomAttribute(key) { keep(attribute) }
                continue
            }
            switch role {
            case .identifier:
                keep(HTMLAttribute(name: key, value: Clobbering.safeID(attribute.value)))
            case .style:
                if let style = filterStyle(attribute.value, element: name, hidden: hidden) {
                    keep(HTMLAttribute(name: key, value: style))
                }
            case .href:
                let cleaned = URLPolicy.clean(attribute.value)
                let classification = URLPolicy.classify(cleaned)
                guard URLPolicy.isAllowedLink(classification) else { continue }
                var value = cleaned
                if classification == .fragment { value = "#" + Clobbering.safeID(String(cleaned.dropFirst())) }
                if case .remote = classification { value = URLPolicy.absolute(cleaned) }
                if classification != .fragment { linkTarget = value }
                keep(HTMLAttribute(name: key, value: value))
            case .usemap:
                let cleaned = URLPolicy.clean(attribute.value)
                guard cleaned.hasPrefix("#"), cleaned.count > 1 else { continue }
                keep(HTMLAttribute(name: key, value: "#" + Clobbering.safeID(String(cleaned.dropFirst()))))
            case .resource:
                let kind = resourceKind(for: node, attribute: key)
                switch gate.decide(attribute.value, kind: kind, element: name, attribute: key, looksHidden: hidden) {
                case .keep(let value): keep(HTMLAttribute(name: key, value: value))
                case .blocked(let index):
                    keep(HTMLAttribute(name: Self.blockedAttributeName(key), value: String(index)))
                case .drop: continue
                }
            case .srcset:
                let kind = resourceKind(for: node, attribute: key)
                var kept: [String] = []
                var blocked: [String] = []
                for candidate in Srcset.parse(attribute.value) {
                    switch gate.decide(candidate.url, kind: kind, element: name, attribute: key, looksHidden: hidden) {
                    case .keep(let value):
                        kept.append(candidate.descriptors.isEmpty ? value : value + " " + candidate.descriptors)
                    case .blocked(let index): blocked.append(String(index))
                    case .drop: continue
                    }
                }
                if !kept.isEmpty {
                    keep(HTMLAttribute(name: key, value: kept.joined(separator: ", ")))
                }
                if !blocked.isEmpty {
                    keep(
                        HTMLAttribute(name: "data-coffer-blocked-srcset", value: blocked.joined(separator: " "))
                    )
                }
            case .plain:
                keep(HTMLAttribute(name: key, value: attribute.value))
            }
        }
        if linkTarget != nil && (name == "a" || name == "area") {
            keep(HTMLAttribute(name: "target", value: "_blank"))
            keep(HTMLAttribute(name: "rel", value: "noopener noreferrer"))
        }
    }
}

/// The `srcset` microsyntax (HTML "parse a srcset attribute"), reduced to what a filter needs:
/// each candidate's URL and its descriptors as written.
enum Srcset {
    struct Candidate {
        var url: String
        var descriptors: String
    }

    static func parse(_ value: String) -> [Candidate] {
        let scalars = Array(value.unicodeScalars)
        var index = 0
        var candidates: [Candidate] = []
        func isSpace(_ scalar: Unicode.Scalar) -> Bool { SanitizerPass.isASCIIWhitespace(scalar) }
        while index < scalars.count {
            while index < scalars.count && (isSpace(scalars[index]) || scalars[index] == ",") { index += 1 }
            if index >= scalars.count { break }
            var url = String.UnicodeScalarView()
            while index < scalars.count && !isSpace(scalars[index]) {
                url.append(scalars[index])
                index += 1
            }
            var descriptors = String.UnicodeScalarView()
            var urlText = String(url)
            if urlText.hasSuffix(",") {
                while urlText.hasSuffix(",") { urlText.removeLast() }
            } else {
                var inParens = false
                while index < scalars.count {
                    let scalar = scalars[index]
                    if scalar == "(" { inParens = true }
                    if scalar == ")" { inParens = false }
                    if scalar == "," && !inParens {
                        index += 1
                        break
                    }
                    descriptors.append(scalar)
                    index += 1
                }
            }
            var text = String(descriptors)
            while let last = text.unicodeScalars.last, isSpace(last) { text.unicodeScalars.removeLast() }
            while let first = text.unicodeScalars.first, isSpace(first) { text.unicodeScalars.removeFirst() }
            // Descriptors are width, density or height numbers; anything else is dropped.
            let plain = text.unicodeScalars.allSatisfy { scalar in
                CSSTokenizer.isNameCodePoint(scalar) && scalar.value < 0x80 || scalar == "." || scalar == " "
                    || scalar == "+"
            }
            if !plain { text = "" }
            if !urlText.isEmpty { candidates.append(Candidate(url: urlText, descriptors: text)) }
        }
        return candidates
    }
}
