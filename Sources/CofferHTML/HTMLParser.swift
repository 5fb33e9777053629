/// Entry points for parsing HTML into an ``HTMLNode`` tree.
///
/// Parsing follows the WHATWG HTML Standard's tokenizer and tree construction stages; input
/// is UTF-8 (ill-formed sequences become U+FFFD). Any input yields a tree: the parser never
/// fails, and deep nesting is handled without recursion.
public enum HTMLParser {
    /// Parses a complete document from UTF-8 bytes; a leading byte order mark is skipped.
    ///
    /// - Parameters:
    ///   - bytes: The document as UTF-8.
    ///   - scripting: Whether the scripting flag is set (it changes how `<noscript>` parses).
    /// - Returns: A node of kind ``HTMLNode/Kind/document``.
    public static func parseDocument<C: Collection<UInt8>>(_ bytes: C, scripting: Bool = false) -> HTMLNode {
        var input = preprocessInput(bytes)
        if input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF {
            input.removeFirst(3)
        }
        var builder = TreeBuilder(tokenizer: HTMLTokenizer(preprocessed: input), scripting: scripting)
        builder.runDocument()
        return builder.document
    }

    /// Parses a complete document from a string.
    public static func parseDocument(_ string: String, scripting: Bool = false) -> HTMLNode {
        parseDocument(Array(string.utf8), scripting: scripting)
    }

    /// Parses a fragment as the children of a context element (the algorithm behind
    /// `innerHTML`).
    ///
    /// - Parameters:
    ///   - bytes: The fragment as UTF-8.
    ///   - context: The context element's local name, for example `"body"`, `"td"` or `"svg"`.
    ///   - namespace: The context element's namespace.
    ///   - scripting: Whether the scripting flag is set.
    /// - Returns: A node of kind ``HTMLNode/Kind/documentFragment`` holding the parsed nodes.
    public static func parseFragment<C: Collection<UInt8>>(
        _ bytes: C,
        context: String = "body",
        namespace: HTMLNamespace = .html,
        scripting: Bool = false
    ) -> HTMLNode {
        parseFragment(bytes, contextElement: HTMLNode.element(context, namespace: namespace), scripting: scripting)
    }

    /// Parses a fragment from a string as the children of a context element.
    public static func parseFragment(
        _ string: String,
        context: String = "body",
        namespace: HTMLNamespace = .html,
        scripting: Bool = false
    ) -> HTMLNode {
        parseFragment(Array(string.utf8), context: context, namespace: namespace, scripting: scripting)
    }

    /// Parses a fragment with an existing element as the context; its attributes matter for
    /// MathML `annotation-xml` (the `encoding` attribute) and its ancestors for a `form` owner.
    public static func parseFragment<C: Collection<UInt8>>(
        _ bytes: C,
        contextElement: HTMLNode,
        scripting: Bool = false
    ) -> HTMLNode {
        var builder = TreeBuilder(tokenizer: HTMLTokenizer(preprocessed: preprocessInput(bytes)), scripting: scripting)
        let root = builder.runFragment(context: contextElement)
        let fragment = HTMLNode.documentFragment()
        root.moveChildren(to: fragment)
        return fragment
    }
}
