import CofferContent
import CofferHTML

#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer target for parse + sanitize (built by `Fuzz/run.sh` with `swiftc -sanitize=fuzzer`).
///
/// For each input: the document and fragment parsers and the serializer run; the sanitizer runs with remote content
/// blocked or allowed (the first byte's low bit) and a `cid:` resolver; and the harness traps when
///
/// - the sanitizer is not idempotent: `sanitize(sanitize(x).html).html != sanitize(x).html`;
/// - the output, parsed again as a browser would, holds a script-capable element, an event handler attribute, a
///   `javascript:`/`vbscript:` URL, or (with remote content blocked) a loading URL attribute to a remote host.
///   (CSS is left to the unit tests and the browser test: a text check cannot tell a `url()` from a string.)
///
/// libFuzzer itself reports crashes, hangs (`-timeout`) and memory blow-ups (`-rss_limit_mb`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size > 0 ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    let allowRemote = (bytes.first ?? 0) & 1 == 1

    let document = HTMLParser.parseDocument(bytes)
    _ = HTMLSerializer.serialize(document)
    _ = HTMLSerializer.serialize(HTMLParser.parseFragment(String(decoding: bytes, as: UTF8.self), context: "td"))

    var sanitizer = MailSanitizer()
    if allowRemote { sanitizer = sanitizer.allowingRemoteContent() }
    let resolver: CIDResolver = { id in
        id.hasPrefix("img") ? EmbeddedAttachment(mediaType: "image/png", data: [0x89, 0x50, 0x4E, 0x47]) : nil
    }
    let once = sanitizer.sanitize(html: bytes, cidResolver: resolver)
    let twice = sanitizer.sanitize(html: once.html, cidResolver: resolver)
    if twice.html != once.html {
        fail("not idempotent", input: bytes, first: once.html, second: twice.html)
    }
    check(once.html, remoteBlocked: !allowRemote, input: bytes)
    return 0
}

private let scriptCapable: Set<String> = [
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "base", "meta", "link", "form", "input",
    "button", "textarea", "select", "svg", "math", "noscript", "template", "portal", "fencedframe",
]
/// Attributes that hold a URL a browser follows or loads.
private let urlAttributes: Set<String> = [
    "href", "src", "srcset", "background", "poster", "action", "formaction", "xlink:href", "ping", "lowsrc",
    "dynsrc", "data", "codebase", "cite", "longdesc", "usemap", "manifest", "icon", "profile", "archive",
]
/// Attributes whose URL loads without a click.
private let loadingAttributes: Set<String> = [
    "src", "srcset", "background", "poster", "lowsrc", "dynsrc", "data", "xlink:href", "icon", "manifest",
]

/// Parses the sanitized fragment as the page does and checks every element and attribute.
private func check(_ html: String, remoteBlocked: Bool, input: [UInt8]) {
    var stack = [HTMLParser.parseFragment(html, context: "div")]
    while let node = stack.popLast() {
        stack.append(contentsOf: node.children)
        if let contents = node.templateContents { stack.append(contents) }
        guard node.kind == .element else { continue }
        if node.namespace != .html || scriptCapable.contains(node.name) {
            fail("element <\(node.name)> survived", input: input, first: html, second: "")
        }
        for attribute in node.attributes {
            let name = attribute.qualifiedName.lowercased()
            if name.hasPrefix("on") { fail("handler \(name) survived", input: input, first: html, second: "") }
            let value = String(
                attribute.value.lowercased().unicodeScalars.filter { $0.value > 0x20 && $0.value != 0x7F }
                    .map(Character.init)
            )
            let urls = name == "srcset" ? srcsetURLs(attribute.value.lowercased()) : [value]
            for url in urls where urlAttributes.contains(name) {
                if url.hasPrefix("javascript:") || url.hasPrefix("vbscript:") {
                    fail("script URL in \(name)", input: input, first: html, second: "")
                }
                if remoteBlocked && loadingAttributes.contains(name) && !url.hasPrefix("data:") {
                    fail("a URL that is not data: in \(name)", input: input, first: html, second: "")
                }
            }
        }
    }
}

/// The URLs of a `srcset`, as the HTML standard's "parse a srcset attribute" finds them: skip whitespace and commas,
/// take the run of non-whitespace characters as the URL (trailing commas end the candidate), then skip the
/// descriptors up to the next comma outside parentheses. A comma inside a URL (as in `data:…;base64,…`) stays part
/// of it.
private func srcsetURLs(_ value: String) -> [String] {
    let characters = Array(value)
    let space: Set<Character> = [" ", "\t", "\n", "\r", "\u{0C}"]
    var urls: [String] = []
    var index = 0
    while index < characters.count {
        while index < characters.count && (space.contains(characters[index]) || characters[index] == ",") { index += 1 }
        guard index < characters.count else { break }
        let start = index
        while index < characters.count && !space.contains(characters[index]) { index += 1 }
        var url = characters[start..<index]
        var endsCandidate = false
        while url.last == "," {
            url = url.dropLast()
            endsCandidate = true
        }
        if !url.isEmpty { urls.append(String(url)) }
        if endsCandidate { continue }
        var depth = 0
        while index < characters.count {
            let character = characters[index]
            if character == "(" { depth += 1 }
            if character == ")" { depth = max(0, depth - 1) }
            if character == "," && depth == 0 { break }
            index += 1
        }
    }
    return urls
}

private func fail(_ reason: String, input: [UInt8], first: String, second: String) -> Never {
    var message = "SanitizerFuzzer: \(reason)\n--- input (\(input.count) bytes)\n"
    message += String(decoding: input.prefix(2000), as: UTF8.self)
    message += "\n--- sanitized\n\(first.prefix(2000))\n--- again\n\(second.prefix(2000))\n"
    message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    abort()
}
