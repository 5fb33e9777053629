import CofferHTML
import CofferSampleMail
import Testing

/// The `body` element of a parsed document.
private func body(of document: HTMLNode) -> HTMLNode? {
    document.children.first { $0.isElement("html") }?.children.first { $0.isElement("body") }
}

/// Parses `html` as a body fragment and serializes it back.
private func roundTrip(_ html: String) -> String {
    HTMLSerializer.serialize(HTMLParser.parseFragment(html))
}

@Test func adoptionAgencyFixesMisnestedFormatting() {
    #expect(roundTrip("<b><i>x</b>y</i>") == "<b><i>x</i></b><i>y</i>")
    #expect(roundTrip("<a href=1><p>x</a>y") == "<a href=\"1\"></a><p><a href=\"1\">x</a>y</p>")
    #expect(roundTrip("<b>1<p>2</b>3</p>") == "<b>1</b><p><b>2</b>3</p>")
    // Formatting elements are reconstructed in the next paragraph.
    #expect(roundTrip("<p><b>x<p>y") == "<p><b>x</b></p><p><b>y</b></p>")
    // Noah's Ark: at most three identical entries are reconstructed.
    #expect(roundTrip("<p><b><b><b><b>x<p>y") == "<p><b><b><b><b>x</b></b></b></b></p><p><b><b><b>y</b></b></b></p>")
}

/// `count` attributes `data-a0=1` … spelled in a tag.
private func manyAttributes(_ count: Int, value: String = "1") -> String {
    (0..<count).map { "data-a\($0)=\(value)" }.joined(separator: " ")
}

/// A repeated attribute is dropped and the first value kept, whether the tag has a few attributes (compared one by
/// one) or many (compared through a set, so that thousands cost linear time).
@Test func repeatedAttributesKeepTheFirstValueHoweverManyThereAre() throws {
    for count in [1, 14, 15, 16, 17, 40] {
        let html = "<div \(manyAttributes(count)) data-a0=2 data-a\(count - 1)=2 data-new=3 data-a0=4>"
        let div = try #require(body(of: HTMLParser.parseDocument(html))?.children.first)
        let expected = (0..<count).map { HTMLAttribute(name: "data-a\($0)", value: "1") }
        #expect(div.attributes == expected + [HTMLAttribute(name: "data-new", value: "3")], "\(count) attributes")
    }
}

/// A second `body` or `html` start tag adds only the attributes the element lacks.
@Test func aRepeatedBodyTagAddsOnlyNewAttributes() throws {
    let document = HTMLParser.parseDocument(
        "<html \(manyAttributes(20))><body \(manyAttributes(20))>x<body data-a5=2 data-new=3><html data-a7=2 lang=en>"
    )
    let html = try #require(document.children.first { $0.isElement("html") })
    let expected = (0..<20).map { HTMLAttribute(name: "data-a\($0)", value: "1") }
    #expect(html.attributes == expected + [HTMLAttribute(name: "lang", value: "en")])
    #expect(body(of: document)?.attributes == expected + [HTMLAttribute(name: "data-new", value: "3")])
}

/// Noah's Ark compares the attributes of formatting elements as sets, for many attributes as for few.
@Test func noahsArkComparesManyAttributesAsSets() {
    let same = manyAttributes(20)
    let reordered = (0..<20).reversed().map { "data-a\($0)=1" }.joined(separator: " ")
    let fourSame = roundTrip("<p><b \(same)><b \(same)><b \(reordered)><b \(same)>x<p>y")
    #expect(fourSame.components(separatedBy: "<b ").count - 1 == 4 + 3)
    let oneDiffers = roundTrip("<p><b \(manyAttributes(20, value: "2"))><b \(same)><b \(same)><b \(same)>x<p>y")
    #expect(oneDiffers.components(separatedBy: "<b ").count - 1 == 4 + 4)
}

@Test func foreignContentAdjustsNamesAndAttributes() throws {
    let html =
        "<svg viewbox='0 0 1 1'><foreignobject><p>hi</p></foreignobject>"
        + "<a xlink:href='#x'>link</a></svg><math definitionurl=u><mi>x</mi></math>"
    let fragment = HTMLParser.parseFragment(html)
    let svg = try #require(fragment.children.first)
    #expect(svg.namespace == .svg && svg.name == "svg")
    #expect(svg.attributes == [HTMLAttribute(name: "viewBox", value: "0 0 1 1")])
    let foreignObject = try #require(svg.children.first)
    #expect(foreignObject.name == "foreignObject" && foreignObject.namespace == .svg)
    #expect(foreignObject.children.first?.isElement("p") == true)
    let link = try #require(svg.children.last)
    #expect(link.namespace == .svg)
    #expect(link.attributes.first == HTMLAttribute(name: "href", value: "#x", namespace: .xlink, prefix: "xlink"))
    let math = try #require(fragment.children.last)
    #expect(math.namespace == .mathml)
    #expect(math.attribute("definitionURL") == "u")
    #expect(math.children.first?.isElement("mi", in: .mathml) == true)
    #expect(
        HTMLSerializer.serialize(fragment)
            == "<svg viewBox=\"0 0 1 1\"><foreignObject><p>hi</p></foreignObject>"
            + "<a xlink:href=\"#x\">link</a></svg><math definitionURL=\"u\"><mi>x</mi></math>"
    )
    // An HTML breakout tag leaves foreign content.
    let breakout = HTMLParser.parseFragment("<svg><g><div>x</div></g></svg>")
    #expect(breakout.children.map(\.name) == ["svg", "div"])
    // CDATA sections are recognised only in foreign content.
    #expect(roundTrip("<svg><![CDATA[a<b]]></svg>") == "<svg>a&lt;b</svg>")
    #expect(roundTrip("<![CDATA[x]]>") == "<!--[CDATA[x]]-->")
}

@Test func templateContentsIsAFragment() throws {
    let document = HTMLParser.parseDocument("<template><tr><td>x</td></tr><tr><td>y</td></tr></template>")
    let head = try #require(document.children.first?.children.first)
    let template = try #require(head.children.first)
    #expect(template.isElement("template"))
    #expect(template.children.isEmpty)
    let contents = try #require(template.templateContents)
    #expect(contents.kind == .documentFragment)
    #expect(contents.children.map(\.name) == ["tr", "tr"])
    #expect(HTMLSerializer.serialize(template) == "<tr><td>x</td></tr><tr><td>y</td></tr>")
    #expect(
        HTMLSerializer.serializeOuter(template) == "<template><tr><td>x</td></tr><tr><td>y</td></tr></template>"
    )
    let cells = HTMLParser.parseFragment("<template><td>a</td><td>b</td></template>")
    #expect(cells.children.first?.templateContents?.children.map(\.name) == ["td", "td"])
}

@Test func fragmentParsingUsesTheContextElement() throws {
    let row = HTMLParser.parseFragment("<td>a<td>b", context: "tr")
    #expect(row.children.map(\.name) == ["td", "td"])
    // In a body context the same markup loses its table cells.
    #expect(roundTrip("<td>a<td>b") == "ab")
    let textarea = HTMLParser.parseFragment("<b>not a tag</b>", context: "textarea")
    #expect(textarea.children.count == 1 && textarea.children.first?.data == "<b>not a tag</b>")
    let script = HTMLParser.parseFragment("if (a < b) {}", context: "script")
    #expect(HTMLSerializer.serialize(script) == "if (a &lt; b) {}")
    let svg = HTMLParser.parseFragment("<path/><circle/>", context: "svg", namespace: .svg)
    #expect(svg.children.allSatisfy { $0.namespace == .svg })
    let select = HTMLParser.parseFragment("<option>a<option>b", context: "select")
    #expect(select.children.map(\.name) == ["option", "option"])
}

@Test func serializerEscapesAngleBracketsInAttributes() {
    let fragment = HTMLParser.parseFragment("<a title='a<b>c&amp;d\"e\u{A0}'>x &lt; y\u{A0}</a>")
    #expect(
        HTMLSerializer.serialize(fragment)
            == "<a title=\"a&lt;b&gt;c&amp;d&quot;e&nbsp;\">x &lt; y&nbsp;</a>"
    )
    #expect(roundTrip("<style>a > b</style><script>x<y</script>") == "<style>a > b</style><script>x<y</script>")
    #expect(roundTrip("<br><img src=x><p>t</p>") == "<br><img src=\"x\"><p>t</p>")
}

@Test func documentStructureAndScriptingFlag() throws {
    let document = HTMLParser.parseDocument("<!DOCTYPE html><title>T</title><body><noscript><p>x</p></noscript>")
    #expect(document.quirksMode == .noQuirks)
    #expect(document.children.first?.kind == .doctype)
    let head = try #require(document.children.last?.children.first)
    #expect(head.children.map(\.name) == ["title"])
    let off = try #require(body(of: document))
    #expect(off.children.first?.isElement("noscript") == true)
    #expect(off.children.first?.children.first?.isElement("p") == true)
    let scripted = HTMLParser.parseDocument("<body><noscript><p>x</p></noscript>", scripting: true)
    let scriptedBody = try #require(body(of: scripted))
    #expect(scriptedBody.children.first?.children.first?.kind == .text)
    #expect(HTMLSerializer.serialize(scriptedBody, scripting: true) == "<noscript><p>x</p></noscript>")
    #expect(HTMLParser.parseDocument("<p>x").quirksMode == .quirks)
    #expect(HTMLParser.parseDocument(Array("\u{FEFF}<p>x</p>".utf8)).children.first?.isElement("html") == true)
}

/// Dropping a tree frees what nothing else holds, deep or not, and leaves a node that something else holds without a
/// dangling parent: its own subtree stays whole.
@Test func droppingATreeKeepsWhatIsHeldElsewhereWhole() throws {
    var held: (child: HTMLNode, grandchild: HTMLNode, template: HTMLNode, orphan: HTMLNode)?
    weak var freed: HTMLNode?
    do {
        let document = HTMLParser.parseDocument(
            "<div id=a><p>one<b>two</b></p></div><div id=b><span>three</span></div><template><i>t</i></template>"
        )
        let divs = document.descendants.filter { $0.isElement(.div) }
        let child = try #require(divs.first)  // <div id=a>, held with its subtree
        let orphan = try #require(divs.last?.firstChild?.firstChild)  // "three", held without its parent
        let template = try #require(document.descendants.first { $0.isElement(.template) })
        let contents = try #require(template.templateContents?.firstChild)  // <i>, held inside template contents
        freed = divs.last
        held = (child, try #require(child.firstChild), contents, orphan)
    }
    let kept = try #require(held)
    #expect(freed == nil, "a node nothing holds was not freed")
    #expect(kept.child.parent == nil)
    #expect(kept.grandchild.parent === kept.child)
    #expect(HTMLSerializer.serializeOuter(kept.child) == "<div id=\"a\"><p>one<b>two</b></p></div>")
    #expect(kept.orphan.parent == nil && kept.orphan.data == "three")
    #expect(kept.template.parent == nil && kept.template.textContent == "t")
}

@Test func invalidUTF8BecomesReplacementCharacters() {
    let bytes: [UInt8] = [0x3C, 0x70, 0x3E, 0x61, 0xFF, 0xC3, 0x28, 0xE2, 0x82, 0x62]
    #expect(HTMLSerializer.serialize(HTMLParser.parseFragment(bytes)) == "<p>a\u{FFFD}\u{FFFD}(\u{FFFD}b</p>")
}

@Test func deepNestingDoesNotOverflow() throws {
    let depth = 100_000
    let input = String(repeating: "<div>", count: depth) + "x" + String(repeating: "</div>", count: depth)
    let document = HTMLParser.parseDocument(input)
    let root = try #require(body(of: document))
    var node = root
    var levels = 0
    while let child = node.children.first, child.kind == .element {
        node = child
        levels += 1
    }
    #expect(levels == depth)
    #expect(root.textContent == "x")
    let serialized = HTMLSerializer.serialize(root)
    #expect(serialized.utf8.count == depth * 11 + 1)
    let formatting = HTMLParser.parseFragment(String(repeating: "<b><i>", count: 20_000) + "x")
    #expect(formatting.textContent == "x")
    let foreign = HTMLParser.parseFragment("<svg>" + String(repeating: "<g>", count: depth))
    #expect(!HTMLSerializer.serialize(foreign).isEmpty)
}

@Test func randomAndMutatedInputNeverCrashes() {
    var generator = SplitMix(seed: 0x9E37_79B9_7F4A_7C15)
    let pieces = [
        "<", ">", "</", "/>", "<!--", "-->", "<!DOCTYPE html>", "<![CDATA[", "]]>", "&", "&amp", "&#x", ";", "=",
        "\"", "'", "<table>", "<tr>", "<td>", "</table>", "<svg>", "<math>", "<mi>", "<foreignObject>", "<template>",
        "</template>", "<select>", "<option>", "<b>", "</b>", "<i>", "<a href=x>", "</a>", "<p>", "<frameset>",
        "<script>", "</script>", "<style>", "<textarea>", "<plaintext>", "<noscript>", "<head>", "<body>", "<html>",
        "\0", "\r\n", " ", "x", "\u{FFFD}", "<annotation-xml encoding=text/html>", "<desc>", "<caption>", "<col>",
        "<selectedcontent>", "<button>", "<form>", "</form>", "<li>", "<dd>", "<h1>", "<ruby><rt>",
    ]
    let contexts: [(String, HTMLNamespace)] = [
        ("body", .html), ("table", .html), ("tr", .html), ("select", .html), ("svg", .svg), ("template", .html),
        ("math", .mathml), ("title", .html),
    ]
    for round in 0..<2_000 {
        var bytes: [UInt8] = []
        let length = Int.random(in: 0..<120, using: &generator)
        if round % 2 == 0 {
            for _ in 0..<length { bytes.append(UInt8.random(in: 0...255, using: &generator)) }
        } else {
            for _ in 0..<(length / 4) {
                if Bool.random(using: &generator) {
                    bytes.append(contentsOf: pieces[Int.random(in: 0..<pieces.count, using: &generator)].utf8)
                } else {
                    bytes.append(UInt8.random(in: 0...255, using: &generator))
                }
            }
        }
        let document = HTMLParser.parseDocument(bytes, scripting: round % 3 == 0)
        let serialized = HTMLSerializer.serialize(document)
        // Serializing and reparsing must work too.
        _ = HTMLParser.parseDocument(serialized)
        let (context, namespace) = contexts[round % contexts.count]
        let fragment = HTMLParser.parseFragment(bytes, context: context, namespace: namespace)
        _ = HTMLSerializer.serialize(fragment)
        var tokenizer = HTMLTokenizer(bytes)
        var count = 0
        while tokenizer.next() != .endOfFile { count += 1 }
        #expect(count <= bytes.count + 1)
    }
}

@Test func treeMutationKeepsParentLinksConsistent() throws {
    var kept: HTMLNode?
    do {
        let fragment = HTMLParser.parseFragment("<div><p>x</p><span>y</span></div>")
        let div = try #require(fragment.children.first)
        #expect(fragment.descendants.map { $0.kind == .text ? $0.data : $0.name } == ["div", "p", "x", "span", "y"])
        let span = try #require(div.lastChild)
        span.remove()
        #expect(span.parent == nil && div.children.count == 1)
        div.insertChild(span, before: div.firstChild)
        #expect(span.parent === div && HTMLSerializer.serialize(div) == "<span>y</span><p>x</p>")
        kept = div.lastChild
    }
    // The tree is gone; the node that outlived it no longer points into it.
    #expect(kept?.parent == nil)
    #expect(kept.map { HTMLSerializer.serializeOuter($0) } == "<p>x</p>")
}

@Test func pathologicalInputsStayLinear() {
    // A selectedcontent inside the option it would mirror must not copy into itself.
    let select = HTMLParser.parseFragment("<select><option><selectedcontent>")
    #expect(HTMLSerializer.serialize(select) == "<select><option><selectedcontent></selectedcontent></option></select>")
    // Thousands of distinct open formatting elements: bounded work per tag and per text run.
    let tags = (0..<5_000).map { "<b id=\($0)>" }.joined()
    let formatting = HTMLParser.parseFragment(tags + String(repeating: "<p>x", count: 50))
    #expect(formatting.textContent == String(repeating: "x", count: 50))
    // Scope checks that fail deep down a tall stack answer without walking it.
    let deep =
        "<p><button>" + String(repeating: "<span>", count: 20_000) + String(repeating: "<div></x>", count: 20_000)
    #expect(HTMLParser.parseFragment(deep).descendants.count == 40_002)
}

@Test func internedNamesAreExactAndFollowRenames() throws {
    for id in HTMLTagID.allCases where id != .other { #expect(HTMLTagID(name: id.name) == id) }
    #expect(HTMLTagID(name: "annotation-xml") == .annotationXML)
    #expect(HTMLTagID(name: "var") == .var)
    // Case-sensitive, as stored names are: the un-adjusted SVG spelling and an upper-case name are not interned.
    #expect(HTMLTagID(name: "foreignobject") == .other)
    #expect(HTMLTagID(name: "DIV") == .other)
    #expect(HTMLTagID(name: "x-widget") == .other)

    let node = HTMLNode.element("x-widget")
    #expect(node.id == .other)
    node.name = "table"
    #expect(node.id == .table && node.isElement(.table))
    #expect(HTMLNode.text("table").id == .other)
    let doctype = HTMLNode.doctype("x")
    doctype.name = "html"
    #expect(doctype.id == .other && !doctype.isElement(.html))
    #expect(HTMLNode.element(namedAs: node, attributes: []).id == .table)
}

@Test func endTagsOfUninternedNamesMatchByName() {
    // Both names are outside the interned table; the end tag must close only the element with its own name.
    #expect(roundTrip("<x-a><x-b>1</x-a>2") == "<x-a><x-b>1</x-b></x-a>2")
    #expect(roundTrip("<x-a><x-b>1</x-c>2") == "<x-a><x-b>12</x-b></x-a>")
    #expect(roundTrip("<x-a><p>1</x-a>2") == "<x-a><p>12</p></x-a>")
}
