// The WHATWG tree construction stage (HTML Standard §13.2.6), including the 2025
// "customizable select" changes (no "in select" insertion modes).

enum InsertionMode {
    case initial, beforeHTML, beforeHead, inHead, inHeadNoscript, afterHead, inBody, text, inTable, inTableText
    case inCaption, inColumnGroup, inTableBody, inRow, inCell, inTemplate, afterBody, inFrameset, afterFrameset
    case afterAfterBody, afterAfterFrameset
}

private enum Scope {
    case normal, listItem, button, table, select
}

/// Builds a DOM tree from the tokenizer's tokens.
struct TreeBuilder {
    var tokenizer: HTMLTokenizer
    let document: HTMLNode
    private var open: [HTMLNode] = []
    /// Stack positions of HTML-namespace elements by interned name, bottom to top.
    private var namePositions = [[Int]](repeating: [], count: HTMLTagID.allCases.count)
    /// Stack positions of HTML-namespace elements whose names are outside the interned table, by name.
    private var otherNamePositions: [String: [Int]] = [:]
    /// Stack positions of scope boundaries for the normal, list item, button and table scopes.
    private var boundaryPositions: [[Int]] = [[], [], [], []]
    /// The list of active formatting elements; `nil` is a marker.
    private var formatting: [HTMLNode?] = []
    private var mode: InsertionMode = .initial
    private var originalMode: InsertionMode = .initial
    private var templateModes: [InsertionMode] = []
    private var headElement: HTMLNode?
    private var formElement: HTMLNode?
    private var framesetOK = true
    private let scripting: Bool
    private var fosterParenting = false
    private var pendingTableText: [UInt8] = []
    private var pendingTableTextDirty = false
    private var context: HTMLNode?
    private var skipLeadingNewline = false
    private var stopped = false
    private var sawSelectedContent = false

    init(tokenizer: HTMLTokenizer, scripting: Bool) {
        self.tokenizer = tokenizer
        self.scripting = scripting
        self.document = HTMLNode(kind: .document)
    }

    // MARK: - Entry points

    /// Parses a whole document.
    mutating func runDocument() {
        run()
    }

    /// Sets up the fragment parsing algorithm for `context` and runs it; returns the root
    /// `html` element whose children are the fragment.
    mutating func runFragment(context: HTMLNode) -> HTMLNode {
        self.context = context
        if context.namespace == .html {
            switch context.id {
            case .title, .textarea: tokenizer.state = .rcdata
            case .style, .xmp, .iframe, .noembed, .noframes: tokenizer.state = .rawtext
            case .script: tokenizer.state = .scriptData
            case .noscript: tokenizer.state = scripting ? .rawtext : .data
            case .plaintext: tokenizer.state = .plaintext
            default: break
            }
        }
        let root = HTMLNode.element("html")
        document.appendChild(root)
        push(root)
        if context.isElement(.template) { templateModes.append(.inTemplate) }
        resetInsertionMode()
        var ancestor: HTMLNode? = context
        while let node = ancestor {
            if node.isElement(.form) {
                formElement = node
                break
            }
            ancestor = node.parent
        }
        run()
        return root
    }

    private mutating func run() {
        while !stopped {
            tokenizer.allowCDATA = (adjustedCurrentNode?.namespace ?? .html) != .html
            var token = tokenizer.next()
            if skipLeadingNewline {
                skipLeadingNewline = false
                if case .characters(let bytes) = token, bytes.first == 0x0A {
                    if bytes.count == 1 { continue }
                    token = .characters(Array(bytes.dropFirst()))
                }
            }
            dispatch(token)
            if case .endOfFile = token { break }
        }
    }

    // MARK: - Stack helpers

    private var currentNode: HTMLNode? { open.last }

    private var adjustedCurrentNode: HTMLNode? {
        if let context, open.count == 1 { return context }
        return open.last
    }

    /// Records the node at stack position `index` in the position indexes.
    private mutating func track(_ node: HTMLNode, at index: Int) {
        let mask: UInt8
        switch node.namespace {
        case .html:
            if node.id == .other {
                otherNamePositions[node.name, default: []].append(index)
            } else {
                namePositions[Int(node.id.rawValue)].append(index)
            }
            mask = Self.htmlBoundaryMasks[Int(node.id.rawValue)]
        case .mathml, .svg:
            mask = isBoundary(node, .normal) ? 0b0111 : 0
        default:
            mask = 0
        }
        guard mask != 0 else { return }
        for slot in 0..<4 where mask & (1 << slot) != 0 { boundaryPositions[slot].append(index) }
    }

    /// For HTML elements: which tracked scopes (bit 0 normal, 1 list item, 2 button, 3 table)
    /// each name bounds.
    private static let htmlBoundaryMasks: [UInt8] = {
        var masks = [UInt8](repeating: 0, count: HTMLTagID.allCases.count)
        for id in [HTMLTagID.applet, .caption, .td, .th, .marquee, .object, .select] {
            masks[Int(id.rawValue)] = 0b0111
        }
        for id in [HTMLTagID.html, .table, .template] { masks[Int(id.rawValue)] = 0b1111 }
        masks[Int(HTMLTagID.ol.rawValue)] = 0b0010
        masks[Int(HTMLTagID.ul.rawValue)] = 0b0010
        masks[Int(HTMLTagID.button.rawValue)] = 0b0100
        return masks
    }()

    /// Rebuilds the position indexes after the stack changed in the middle.
    private mutating func rebuildPositions() {
        for index in namePositions.indices { namePositions[index].removeAll(keepingCapacity: true) }
        otherNamePositions.removeAll(keepingCapacity: true)
        boundaryPositions = [[], [], [], []]
        for (index, node) in open.enumerated() { track(node, at: index) }
    }

    private mutating func push(_ node: HTMLNode) {
        open.append(node)
        track(node, at: open.count - 1)
    }

    @discardableResult
    private mutating func pop() -> HTMLNode? {
        guard let node = open.popLast() else { return nil }
        let index = open.count
        for slot in 0..<boundaryPositions.count where boundaryPositions[slot].last == index {
            boundaryPositions[slot].removeLast()
        }
        if node.namespace == .html {
            if node.id != .other {
                namePositions[Int(node.id.rawValue)].removeLast()
            } else if let entry = otherNamePositions.index(forKey: node.name) {
                otherNamePositions.values[entry].removeLast()
            }
            if sawSelectedContent && node.id == .option { maybeCloneIntoSelectedContent(node) }
        }
        return node
    }

    /// "Maybe clone an option into selectedcontent": when a selected option is popped, its
    /// children are copied into the enclosing select's first `selectedcontent` element.
    private func maybeCloneIntoSelectedContent(_ option: HTMLNode) {
        var ancestor = option.parent
        while let node = ancestor, !node.isElement(.select) { ancestor = node.parent }
        guard let select = ancestor else { return }
        var selectedContent: HTMLNode?
        var options: [HTMLNode] = []
        var stack: [HTMLNode] = select.children.reversed()
        while let node = stack.popLast() {
            if node.isElement(.selectedcontent) && selectedContent == nil { selectedContent = node }
            if node.isElement(.option) { options.append(node) }
            if node.isElement(.select) { continue }
            stack.append(contentsOf: node.children.reversed())
        }
        guard let target = selectedContent else { return }
        // A selectedcontent inside the option itself would copy into its own source.
        var up: HTMLNode? = target
        while let node = up {
            if node === option { return }
            up = node.parent
        }
        let selected = options.last { $0.attribute("selected") != nil } ?? options.first
        guard selected === option else { return }
        target.removeAllChildren()
        var copies: [(source: HTMLNode, parent: HTMLNode)] = option.children.reversed().map { ($0, target) }
        while let (source, parent) = copies.popLast() {
            let copy = source.cloneShallow()
            parent.appendChild(copy)
            copies.append(contentsOf: source.children.reversed().map { ($0, copy) })
        }
    }

    private mutating func removeFromStack(at index: Int) {
        open.remove(at: index)
        rebuildPositions()
    }

    private mutating func insertInStack(_ node: HTMLNode, at index: Int) {
        open.insert(node, at: index)
        rebuildPositions()
    }

    private func stackIndex(of node: HTMLNode) -> Int? {
        var index = open.count - 1
        while index >= 0 {
            if open[index] === node { return index }
            index -= 1
        }
        return nil
    }

    private func isOnStack(_ id: HTMLTagID) -> Bool { !namePositions[Int(id.rawValue)].isEmpty }

    /// Whether an HTML element named as `tag` is on the stack, for names in or outside the interned table.
    private func isOnStack(_ tag: HTMLTag) -> Bool {
        tag.id == .other ? otherNamePositions[tag.name]?.isEmpty == false : isOnStack(tag.id)
    }

    /// The topmost scope boundary position for a tracked scope (-1 when there is none).
    private func topBoundary(_ scope: Scope) -> Int {
        switch scope {
        case .normal: return boundaryPositions[0].last ?? -1
        case .listItem: return boundaryPositions[1].last ?? -1
        case .button: return boundaryPositions[2].last ?? -1
        case .table: return boundaryPositions[3].last ?? -1
        case .select: return -1
        }
    }

    private func currentIs(_ id: HTMLTagID) -> Bool {
        guard let node = open.last else { return false }
        return node.namespace == .html && node.id == id
    }

    private mutating func popUntil(_ id: HTMLTagID) {
        while let node = pop() {
            if node.namespace == .html && node.id == id { return }
        }
    }

    private mutating func popUntil(anyOf ids: HTMLTagSet) {
        while let node = pop() {
            if node.namespace == .html && ids.contains(node.id) { return }
        }
    }

    private func isBoundary(_ node: HTMLNode, _ scope: Scope) -> Bool {
        switch scope {
        case .table:
            return node.namespace == .html && (node.id == .html || node.id == .table || node.id == .template)
        case .select:
            return !(node.namespace == .html && (node.id == .optgroup || node.id == .option))
        default:
            switch node.namespace {
            case .html:
                switch node.id {
                case .applet, .caption, .html, .table, .td, .th, .marquee, .object, .template, .select:
                    return true
                case .ol, .ul: return scope == .listItem
                case .button: return scope == .button
                default: return false
                }
            case .mathml:
                switch node.id {
                case .mi, .mo, .mn, .ms, .mtext, .annotationXML: return true
                default: return false
                }
            case .svg:
                return node.id == .foreignObject || node.id == .desc || node.id == .title
            default:
                return false
            }
        }
    }

    private func hasInScope(_ id: HTMLTagID, _ scope: Scope = .normal) -> Bool {
        guard let position = namePositions[Int(id.rawValue)].last else { return false }
        if scope != .select { return position >= topBoundary(scope) }
        var index = open.count - 1
        while index >= 0 {
            let node = open[index]
            if node.namespace == .html && node.id == id { return true }
            if isBoundary(node, scope) { return false }
            index -= 1
        }
        return false
    }

    private func hasAnyInScope(_ ids: [HTMLTagID], _ scope: Scope = .normal) -> Bool {
        guard ids.contains(where: { isOnStack($0) }) else { return false }
        if scope != .select {
            let top = ids.compactMap { namePositions[Int($0.rawValue)].last }.max() ?? -1
            return top >= topBoundary(scope)
        }
        var index = open.count - 1
        while index >= 0 {
            let node = open[index]
            if node.namespace == .html && ids.contains(node.id) { return true }
            if isBoundary(node, scope) { return false }
            index -= 1
        }
        return false
    }

    private func hasNodeInScope(_ target: HTMLNode) -> Bool {
        var index = open.count - 1
        while index >= 0 {
            let node = open[index]
            if node === target { return true }
            if isBoundary(node, .normal) { return false }
            index -= 1
        }
        return false
    }

    private static let impliedEndTags: HTMLTagSet = [
        .dd, .dt, .li, .optgroup, .option, .p, .rb, .rp, .rt, .rtc,
    ]
    private static let impliedEndTagsThorough: HTMLTagSet = [
        .caption, .colgroup, .dd, .dt, .li, .optgroup, .option, .p, .rb, .rp, .rt, .rtc, .tbody, .td,
        .tfoot, .th, .thead, .tr,
    ]

    private mutating func generateImpliedEndTags(except id: HTMLTagID? = nil) {
        while let node = open.last, node.namespace == .html, Self.impliedEndTags.contains(node.id), node.id != id {
            pop()
        }
    }

    private mutating func generateImpliedEndTagsThoroughly() {
        while let node = open.last, node.namespace == .html, Self.impliedEndTagsThorough.contains(node.id) {
            pop()
        }
    }

    private mutating func closePElement() {
        generateImpliedEndTags(except: .p)
        popUntil(.p)
    }

    private mutating func closePIfInButtonScope() {
        if hasInScope(.p, .button) { closePElement() }
    }

    // MARK: - Insertion

    /// The appropriate place for inserting a node: a parent and the child to insert before.
    private func appropriatePlace(override target: HTMLNode? = nil) -> (parent: HTMLNode, before: HTMLNode?) {
        guard let target = target ?? open.last else { return (document, nil) }
        var parent = target
        var before: HTMLNode?
        if fosterParenting && target.namespace == .html {
            switch target.id {
            case .table, .tbody, .tfoot, .thead, .tr:
                var lastTemplate: Int?
                var lastTable: Int?
                var index = open.count - 1
                while index >= 0 && (lastTemplate == nil || lastTable == nil) {
                    let node = open[index]
                    if node.namespace == .html {
                        if node.id == .template && lastTemplate == nil { lastTemplate = index }
                        if node.id == .table && lastTable == nil { lastTable = index }
                    }
                    index -= 1
                }
                if let templateIndex = lastTemplate, lastTable == nil || templateIndex > lastTable ?? 0 {
                    let template = open[templateIndex]
                    return (template.templateContents ?? template, nil)
                }
                guard let tableIndex = lastTable else { return (open[0], nil) }
                let table = open[tableIndex]
                if let tableParent = table.parent {
                    return (tableParent, table)
                }
                parent = open[max(0, tableIndex - 1)]
                before = nil
            default:
                break
            }
        }
        if parent.isElement(.template), let contents = parent.templateContents {
            return (contents, before)
        }
        return (parent, before)
    }

    private func insert(_ node: HTMLNode, at place: (parent: HTMLNode, before: HTMLNode?)) {
        if place.parent.kind == .document && node.kind == .element
            && place.parent.children.contains(where: { $0.kind == .element })
        {
            return
        }
        place.parent.insertChild(node, before: place.before)
    }

    private func createElement(_ tag: HTMLTag, namespace: HTMLNamespace) -> HTMLNode {
        HTMLNode.element(tag, namespace: namespace, attributes: tag.attributes)
    }

    @discardableResult
    private mutating func insertHTMLElement(_ tag: HTMLTag) -> HTMLNode {
        let node = createElement(tag, namespace: .html)
        if tag.id == .selectedcontent { sawSelectedContent = true }
        insert(node, at: appropriatePlace())
        push(node)
        return node
    }

    @discardableResult
    private mutating func insertHTMLElement(named id: HTMLTagID) -> HTMLNode {
        insertHTMLElement(HTMLTag(name: id.name, id: id))
    }

    private mutating func insertForeignElement(_ tag: HTMLTag, namespace: HTMLNamespace) {
        let node = createElement(tag, namespace: namespace)
        insert(node, at: appropriatePlace())
        push(node)
    }

    private func insertCharacters<S: Collection<UInt8>>(_ bytes: S) {
        let place = appropriatePlace()
        if place.parent.kind == .document { return }
        let previous: HTMLNode?
        if let before = place.before, let index = place.parent.index(of: before) {
            previous = index > 0 ? place.parent.children[index - 1] : nil
        } else {
            previous = place.parent.lastChild
        }
        let string = String(decoding: bytes, as: UTF8.self)
        if let previous, previous.kind == .text {
            previous.data += string
        } else {
            place.parent.insertChild(HTMLNode.text(string), before: place.before)
        }
    }

    private func insertComment(_ data: String, into parent: HTMLNode? = nil) {
        let node = HTMLNode.comment(data)
        if let parent {
            parent.appendChild(node)
        } else {
            insert(node, at: appropriatePlace())
        }
    }

    private mutating func genericTextElement(_ tag: HTMLTag, state: HTMLTokenizer.State) {
        insertHTMLElement(tag)
        tokenizer.state = state
        originalMode = mode
        mode = .text
    }

    // MARK: - Active formatting elements

    /// The most entries kept after the last marker. The standard sets no limit, but without
    /// one, input such as 100,000 `<b id=N>` tags makes the Noah's Ark scan quadratic and each
    /// reconstruction clone an unbounded number of elements; beyond this many open formatting
    /// elements the earliest one is dropped from the list (it stays in the tree).
    static let maxFormattingEntries = 128

    private mutating func pushFormatting(_ node: HTMLNode) {
        var count = 0
        var earliest: Int?
        var first = formatting.count
        var index = formatting.count - 1
        while index >= 0 {
            guard let entry = formatting[index] else { break }
            if entry.id == node.id && entry.name == node.name && entry.namespace == node.namespace
                && sameAttributes(entry.attributes, node.attributes)
            {
                count += 1
                earliest = index
            }
            first = index
            index -= 1
        }
        if count >= 3, let earliest {
            formatting.remove(at: earliest)
        } else if formatting.count - first >= Self.maxFormattingEntries {
            formatting.remove(at: first)
        }
        formatting.append(node)
    }

    /// Whether two elements' attributes are the same (in any order); through a set when there are many, so that two
    /// tags with thousands of attributes are compared in linear time.
    private func sameAttributes(_ a: [HTMLAttribute], _ b: [HTMLAttribute]) -> Bool {
        guard a.count == b.count else { return false }
        if a.count <= SeenNames.setAt { return a.allSatisfy { b.contains($0) } }
        let others = Set(b)
        return a.allSatisfy { others.contains($0) }
    }

    /// Adds to `element` the attributes of a repeated `html` or `body` start tag that it does not have yet, in time
    /// linear in both counts.
    private func addMissingAttributes(_ attributes: [HTMLAttribute], to element: HTMLNode) {
        var names = Set(element.attributes.map(\.name))
        for attribute in attributes where names.insert(attribute.name).inserted {
            element.attributes.append(attribute)
        }
    }

    private mutating func reconstructFormatting() {
        guard let last = formatting.last else { return }
        guard let lastNode = last, stackIndex(of: lastNode) == nil else { return }
        var index = formatting.count - 1
        while index > 0 {
            guard let previous = formatting[index - 1], stackIndex(of: previous) == nil else { break }
            index -= 1
        }
        while index < formatting.count {
            guard let entry = formatting[index] else {
                index += 1
                continue
            }
            let clone = entry.cloneShallow()
            insert(clone, at: appropriatePlace())
            push(clone)
            formatting[index] = clone
            index += 1
        }
    }

    private mutating func clearFormattingToLastMarker() {
        while let entry = formatting.popLast() {
            if entry == nil { return }
        }
    }

    private func formattingIndex(of node: HTMLNode) -> Int? {
        var index = formatting.count - 1
        while index >= 0 {
            if formatting[index] === node { return index }
            index -= 1
        }
        return nil
    }

    /// The last formatting element named `id` after the last marker.
    private func lastFormatting(named id: HTMLTagID) -> HTMLNode? {
        var index = formatting.count - 1
        while index >= 0 {
            guard let entry = formatting[index] else { return nil }
            if entry.id == id && entry.namespace == .html { return entry }
            index -= 1
        }
        return nil
    }

    /// The adoption agency algorithm; returns false when the caller should act as for
    /// "any other end tag".
    @discardableResult
    private mutating func adoptionAgency(_ subject: HTMLTagID) -> Bool {
        if let current = open.last, current.namespace == .html, current.id == subject,
            formattingIndex(of: current) == nil
        {
            pop()
            return true
        }
        for _ in 0..<8 {
            guard let formattingElement = lastFormatting(named: subject) else { return false }
            guard let formattingStackIndex = stackIndex(of: formattingElement) else {
                if let index = formattingIndex(of: formattingElement) { formatting.remove(at: index) }
                return true
            }
            guard hasNodeInScope(formattingElement) else { return true }
            var furthestBlockIndex: Int?
            var index = formattingStackIndex + 1
            while index < open.count {
                if isSpecial(open[index]) {
                    furthestBlockIndex = index
                    break
                }
                index += 1
            }
            guard let furthestIndex = furthestBlockIndex else {
                while let node = pop(), node !== formattingElement {}
                if let index = formattingIndex(of: formattingElement) { formatting.remove(at: index) }
                return true
            }
            let furthestBlock = open[furthestIndex]
            let commonAncestor = open[formattingStackIndex - 1]
            var bookmark = formattingIndex(of: formattingElement) ?? formatting.count
            var node = furthestBlock
            var lastNode = furthestBlock
            var nodeIndex = furthestIndex
            var innerCounter = 0
            while true {
                innerCounter += 1
                nodeIndex -= 1
                node = open[nodeIndex]
                if node === formattingElement { break }
                var nodeFormattingIndex = formattingIndex(of: node)
                if innerCounter > 3, let listIndex = nodeFormattingIndex {
                    formatting.remove(at: listIndex)
                    if listIndex < bookmark { bookmark -= 1 }
                    nodeFormattingIndex = nil
                }
                guard let listIndex = nodeFormattingIndex else {
                    removeFromStack(at: nodeIndex)
                    continue
                }
                let clone = node.cloneShallow()
                formatting[listIndex] = clone
                removeFromStack(at: nodeIndex)
                insertInStack(clone, at: nodeIndex)
                node = clone
                if lastNode === furthestBlock { bookmark = listIndex + 1 }
                node.appendChild(lastNode)
                lastNode = node
            }
            insert(lastNode, at: appropriatePlace(override: commonAncestor))
            let newElement = formattingElement.cloneShallow()
            furthestBlock.moveChildren(to: newElement)
            furthestBlock.appendChild(newElement)
            if let index = formattingIndex(of: formattingElement) {
                formatting.remove(at: index)
                if index < bookmark { bookmark -= 1 }
            }
            formatting.insert(newElement, at: min(bookmark, formatting.count))
            if let index = stackIndex(of: formattingElement) { removeFromStack(at: index) }
            if let index = stackIndex(of: furthestBlock) {
                insertInStack(newElement, at: index + 1)
            }
        }
        return true
    }

    // MARK: - Insertion mode reset

    private mutating func resetInsertionMode() {
        var index = open.count - 1
        while index >= 0 {
            var node = open[index]
            let last = index == 0
            if last, let context { node = context }
            if node.namespace == .html {
                switch node.id {
                case .td, .th:
                    if !last {
                        mode = .inCell
                        return
                    }
                case .tr:
                    mode = .inRow
                    return
                case .tbody, .thead, .tfoot:
                    mode = .inTableBody
                    return
                case .caption:
                    mode = .inCaption
                    return
                case .colgroup:
                    mode = .inColumnGroup
                    return
                case .table:
                    mode = .inTable
                    return
                case .template:
                    mode = templateModes.last ?? .inTemplate
                    return
                case .head:
                    if !last {
                        mode = .inHead
                        return
                    }
                case .body:
                    mode = .inBody
                    return
                case .frameset:
                    mode = .inFrameset
                    return
                case .html:
                    mode = headElement == nil ? .beforeHead : .afterHead
                    return
                default:
                    break
                }
            }
            if last {
                mode = .inBody
                return
            }
            index -= 1
        }
        mode = .inBody
    }

    // MARK: - Dispatch

    private mutating func dispatch(_ token: HTMLToken) {
        if usesHTMLRules(token) {
            process(token, in: mode)
        } else {
            processForeign(token)
        }
    }

    private func usesHTMLRules(_ token: HTMLToken) -> Bool {
        guard let node = adjustedCurrentNode, node.namespace != .html else { return true }
        switch token {
        case .startTag(let tag):
            if isMathMLTextIntegrationPoint(node) && tag.id != .mglyph && tag.id != .malignmark {
                return true
            }
            if node.namespace == .mathml && node.id == .annotationXML && tag.id == .svg { return true }
            return isHTMLIntegrationPoint(node)
        case .characters, .nullCharacter:
            return isMathMLTextIntegrationPoint(node) || isHTMLIntegrationPoint(node)
        case .endOfFile:
            return true
        default:
            return false
        }
    }

    private mutating func process(_ token: HTMLToken, in mode: InsertionMode) {
        switch mode {
        case .initial: initialMode(token)
        case .beforeHTML: beforeHTMLMode(token)
        case .beforeHead: beforeHeadMode(token)
        case .inHead: inHeadMode(token)
        case .inHeadNoscript: inHeadNoscriptMode(token)
        case .afterHead: afterHeadMode(token)
        case .inBody: inBodyMode(token)
        case .text: textMode(token)
        case .inTable: inTableMode(token)
        case .inTableText: inTableTextMode(token)
        case .inCaption: inCaptionMode(token)
        case .inColumnGroup: inColumnGroupMode(token)
        case .inTableBody: inTableBodyMode(token)
        case .inRow: inRowMode(token)
        case .inCell: inCellMode(token)
        case .inTemplate: inTemplateMode(token)
        case .afterBody: afterBodyMode(token)
        case .inFrameset: inFramesetMode(token)
        case .afterFrameset: afterFramesetMode(token)
        case .afterAfterBody: afterAfterBodyMode(token)
        case .afterAfterFrameset: afterAfterFramesetMode(token)
        }
    }

    /// Splits leading whitespace off a character run.
    private func splitLeadingWhitespace(_ bytes: [UInt8]) -> (ArraySlice<UInt8>, ArraySlice<UInt8>) {
        var index = 0
        while index < bytes.count && isHTMLWhitespace(bytes[index]) { index += 1 }
        return (bytes[0..<index], bytes[index...])
    }

    /// Handles a character token in a mode where whitespace is inserted (or ignored) and
    /// anything else is handled by `otherwise`, which receives the remaining characters.
    private mutating func handleWhitespacePrefix(
        _ bytes: [UInt8],
        insertWhitespace: Bool,
        otherwise: (inout TreeBuilder, HTMLToken) -> Void
    ) {
        let (space, rest) = splitLeadingWhitespace(bytes)
        if insertWhitespace && !space.isEmpty { insertCharacters(space) }
        if !rest.isEmpty { otherwise(&self, .characters(Array(rest))) }
    }

    // MARK: - Insertion modes

    private mutating func initialMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: false) { $0.initialAnythingElse($1) }
        case .comment(let data):
            insertComment(data, into: document)
        case .doctype(let doctype):
            let node = HTMLNode.doctype(doctype.name ?? "", publicId: doctype.publicId, systemId: doctype.systemId)
            document.appendChild(node)
            document.quirksMode = quirksMode(for: doctype)
            mode = .beforeHTML
        default:
            initialAnythingElse(token)
        }
    }

    private mutating func initialAnythingElse(_ token: HTMLToken) {
        document.quirksMode = .quirks
        mode = .beforeHTML
        process(token, in: mode)
    }

    private mutating func beforeHTMLMode(_ token: HTMLToken) {
        switch token {
        case .doctype:
            return
        case .comment(let data):
            insertComment(data, into: document)
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: false) { $0.beforeHTMLAnythingElse($1) }
        case .startTag(let tag) where tag.id == .html:
            let node = createElement(tag, namespace: .html)
            document.appendChild(node)
            push(node)
            mode = .beforeHead
        case .endTag(let name) where ![.head, .body, .html, .br].contains(name.id):
            return
        default:
            beforeHTMLAnythingElse(token)
        }
    }

    private mutating func beforeHTMLAnythingElse(_ token: HTMLToken) {
        let node = HTMLNode.element("html")
        document.appendChild(node)
        push(node)
        mode = .beforeHead
        process(token, in: mode)
    }

    private mutating func beforeHeadMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: false) { $0.beforeHeadAnythingElse($1) }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .startTag(let tag) where tag.id == .head:
            headElement = insertHTMLElement(tag)
            mode = .inHead
        case .endTag(let name) where ![.head, .body, .html, .br].contains(name.id):
            return
        default:
            beforeHeadAnythingElse(token)
        }
    }

    private mutating func beforeHeadAnythingElse(_ token: HTMLToken) {
        headElement = insertHTMLElement(named: .head)
        mode = .inHead
        process(token, in: mode)
    }

    private mutating func inHeadMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: true) { $0.inHeadAnythingElse($1) }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag):
            switch tag.id {
            case .html:
                inBodyMode(token)
            case .base, .basefont, .bgsound, .link, .meta:
                insertHTMLElement(tag)
                pop()
            case .title:
                genericTextElement(tag, state: .rcdata)
            case .noscript where scripting:
                genericTextElement(tag, state: .rawtext)
            case .noframes, .style:
                genericTextElement(tag, state: .rawtext)
            case .noscript:
                insertHTMLElement(tag)
                mode = .inHeadNoscript
            case .script:
                genericTextElement(tag, state: .scriptData)
            case .template:
                insertHTMLElement(tag)
                formatting.append(nil)
                framesetOK = false
                mode = .inTemplate
                templateModes.append(.inTemplate)
            case .head:
                return
            default:
                inHeadAnythingElse(token)
            }
        case .endTag(let name):
            switch name.id {
            case .head:
                pop()
                mode = .afterHead
            case .body, .html, .br:
                inHeadAnythingElse(token)
            case .template:
                guard isOnStack(.template) else { return }
                generateImpliedEndTagsThoroughly()
                popUntil(.template)
                clearFormattingToLastMarker()
                if !templateModes.isEmpty { templateModes.removeLast() }
                resetInsertionMode()
            default:
                return
            }
        default:
            inHeadAnythingElse(token)
        }
    }

    private mutating func inHeadAnythingElse(_ token: HTMLToken) {
        pop()
        mode = .afterHead
        process(token, in: mode)
    }

    private mutating func inHeadNoscriptMode(_ token: HTMLToken) {
        switch token {
        case .doctype:
            return
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .endTag(let name) where name.id == .noscript:
            pop()
            mode = .inHead
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: true) { $0.inHeadNoscriptAnythingElse($1) }
        case .comment:
            inHeadMode(token)
        case .startTag(let tag) where [.basefont, .bgsound, .link, .meta, .noframes, .style].contains(tag.id):
            inHeadMode(token)
        case .startTag(let tag) where tag.id == .head || tag.id == .noscript:
            return
        case .endTag(let name) where name.id != .br:
            return
        default:
            inHeadNoscriptAnythingElse(token)
        }
    }

    private mutating func inHeadNoscriptAnythingElse(_ token: HTMLToken) {
        pop()
        mode = .inHead
        process(token, in: mode)
    }

    private mutating func afterHeadMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: true) { $0.afterHeadAnythingElse($1) }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag):
            switch tag.id {
            case .html:
                inBodyMode(token)
            case .body:
                insertHTMLElement(tag)
                framesetOK = false
                mode = .inBody
            case .frameset:
                insertHTMLElement(tag)
                mode = .inFrameset
            case .base, .basefont, .bgsound, .link, .meta, .noframes, .script, .style, .template, .title:
                guard let head = headElement else {
                    afterHeadAnythingElse(token)
                    return
                }
                push(head)
                inHeadMode(token)
                if let index = stackIndex(of: head) { removeFromStack(at: index) }
            case .head:
                return
            default:
                afterHeadAnythingElse(token)
            }
        case .endTag(let name):
            switch name.id {
            case .template: inHeadMode(token)
            case .body, .html, .br: afterHeadAnythingElse(token)
            default: return
            }
        default:
            afterHeadAnythingElse(token)
        }
    }

    private mutating func afterHeadAnythingElse(_ token: HTMLToken) {
        insertHTMLElement(named: .body)
        mode = .inBody
        process(token, in: mode)
    }

    private mutating func inBodyMode(_ token: HTMLToken) {
        switch token {
        case .nullCharacter:
            return
        case .characters(let bytes):
            reconstructFormatting()
            insertCharacters(bytes)
            if framesetOK && bytes.contains(where: { !isHTMLWhitespace($0) }) { framesetOK = false }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag):
            inBodyStartTag(tag, token: token)
        case .endTag(let name):
            inBodyEndTag(name, token: token)
        case .endOfFile:
            if !templateModes.isEmpty {
                inTemplateMode(token)
            } else {
                stopParsing()
            }
        }
    }

    private mutating func stopParsing() {
        stopped = true
        while !open.isEmpty { pop() }
    }

    /// Start tag names with a rule of their own in the "in body" insertion mode.
    private static let inBodyStartTagNames: HTMLTagSet = [
        .html, .base, .basefont, .bgsound, .link, .meta, .noframes, .script, .style, .template, .title,
        .body, .frameset, .address, .article, .aside, .blockquote, .center, .details, .dialog, .dir, .div,
        .dl, .fieldset, .figcaption, .figure, .footer, .header, .hgroup, .main, .menu, .nav, .ol, .p,
        .search, .section, .summary, .ul, .h1, .h2, .h3, .h4, .h5, .h6, .pre, .listing, .form, .li, .dd,
        .dt, .plaintext, .button, .a, .b, .big, .code, .em, .font, .i, .s, .small, .strike, .strong,
        .tt, .u, .nobr, .applet, .marquee, .object, .table, .area, .br, .embed, .img, .keygen, .wbr,
        .input, .param, .source, .track, .hr, .image, .textarea, .xmp, .iframe, .noembed, .noscript,
        .select, .option, .optgroup, .rb, .rtc, .rp, .rt, .math, .svg, .caption, .col, .colgroup, .frame,
        .head, .tbody, .td, .tfoot, .th, .thead, .tr,
    ]

    /// End tag names with a rule of their own in the "in body" insertion mode.
    private static let inBodyEndTagNames: HTMLTagSet = [
        .template, .body, .html, .address, .article, .aside, .blockquote, .button, .center, .details,
        .dialog, .dir, .div, .dl, .fieldset, .figcaption, .figure, .footer, .header, .hgroup, .listing,
        .main, .menu, .nav, .ol, .pre, .search, .section, .summary, .ul, .form, .p, .li, .dd, .dt, .h1,
        .h2, .h3, .h4, .h5, .h6, .a, .b, .big, .code, .em, .font, .i, .nobr, .s, .small, .strike,
        .strong, .tt, .u, .applet, .marquee, .object, .br,
    ]

    private mutating func inBodyStartTag(_ tag: HTMLTag, token: HTMLToken) {
        if !Self.inBodyStartTagNames.contains(tag.id) {
            reconstructFormatting()
            insertHTMLElement(tag)
            return
        }
        switch tag.id {
        case .html:
            guard !isOnStack(.template), let root = open.first else { return }
            addMissingAttributes(tag.attributes, to: root)
        case .base, .basefont, .bgsound, .link, .meta, .noframes, .script, .style, .template, .title:
            inHeadMode(token)
        case .body:
            guard open.count > 1, open[1].isElement(.body), !isOnStack(.template) else { return }
            framesetOK = false
            addMissingAttributes(tag.attributes, to: open[1])
        case .frameset:
            guard open.count > 1, open[1].isElement(.body), framesetOK else { return }
            open[1].remove()
            while open.count > 1 { pop() }
            insertHTMLElement(tag)
            mode = .inFrameset
        case .address, .article, .aside, .blockquote, .center, .details, .dialog, .dir, .div, .dl,
            .fieldset, .figcaption, .figure, .footer, .header, .hgroup, .main, .menu, .nav, .ol, .p,
            .search, .section, .summary, .ul:
            closePIfInButtonScope()
            insertHTMLElement(tag)
        case .h1, .h2, .h3, .h4, .h5, .h6:
            closePIfInButtonScope()
            if let current = currentNode, current.namespace == .html,
                [.h1, .h2, .h3, .h4, .h5, .h6].contains(current.id)
            {
                pop()
            }
            insertHTMLElement(tag)
        case .pre, .listing:
            closePIfInButtonScope()
            insertHTMLElement(tag)
            skipLeadingNewline = true
            framesetOK = false
        case .form:
            let inTemplate = isOnStack(.template)
            if formElement != nil && !inTemplate { return }
            closePIfInButtonScope()
            let node = insertHTMLElement(tag)
            if !inTemplate { formElement = node }
        case .li, .dd, .dt:
            framesetOK = false
            var index = open.count - 1
            while index >= 0 {
                let node = open[index]
                if node.namespace == .html {
                    let matches = tag.id == .li ? node.id == .li : (node.id == .dd || node.id == .dt)
                    if matches {
                        generateImpliedEndTags(except: node.id)
                        popUntil(node.id)
                        break
                    }
                }
                if isSpecial(node) && !(node.namespace == .html && [.address, .div, .p].contains(node.id)) {
                    break
                }
                index -= 1
            }
            closePIfInButtonScope()
            insertHTMLElement(tag)
        case .plaintext:
            closePIfInButtonScope()
            insertHTMLElement(tag)
            tokenizer.state = .plaintext
        case .button:
            if hasInScope(.button) {
                generateImpliedEndTags()
                popUntil(.button)
            }
            reconstructFormatting()
            insertHTMLElement(tag)
            framesetOK = false
        case .a:
            if let existing = lastFormatting(named: .a) {
                adoptionAgency(.a)
                if let index = formattingIndex(of: existing) { formatting.remove(at: index) }
                if let index = stackIndex(of: existing) { removeFromStack(at: index) }
            }
            reconstructFormatting()
            pushFormatting(insertHTMLElement(tag))
        case .b, .big, .code, .em, .font, .i, .s, .small, .strike, .strong, .tt, .u:
            reconstructFormatting()
            pushFormatting(insertHTMLElement(tag))
        case .nobr:
            reconstructFormatting()
            if hasInScope(.nobr) {
                if !adoptionAgency(.nobr) { anyOtherEndTag(HTMLTag(name: "nobr", id: .nobr)) }
                reconstructFormatting()
            }
            pushFormatting(insertHTMLElement(tag))
        case .applet, .marquee, .object:
            reconstructFormatting()
            insertHTMLElement(tag)
            formatting.append(nil)
            framesetOK = false
        case .table:
            if document.quirksMode != .quirks { closePIfInButtonScope() }
            insertHTMLElement(tag)
            framesetOK = false
            mode = .inTable
        case .area, .br, .embed, .img, .keygen, .wbr:
            reconstructFormatting()
            insertHTMLElement(tag)
            pop()
            framesetOK = false
        case .input:
            if let context, context.isElement(.select) { return }
            if hasInScope(.select) { popUntil(.select) }
            reconstructFormatting()
            insertHTMLElement(tag)
            pop()
            let type = tag.attributes.first { $0.name == "type" }?.value.lowercasedASCII
            if type != "hidden" { framesetOK = false }
        case .param, .source, .track:
            insertHTMLElement(tag)
            pop()
        case .hr:
            closePIfInButtonScope()
            if hasInScope(.select) { generateImpliedEndTags() }
            insertHTMLElement(tag)
            pop()
            framesetOK = false
        case .image:
            var renamed = tag
            renamed.name = "img"
            inBodyStartTag(renamed, token: .startTag(renamed))
        case .textarea:
            insertHTMLElement(tag)
            skipLeadingNewline = true
            tokenizer.state = .rcdata
            originalMode = mode
            framesetOK = false
            mode = .text
        case .xmp:
            closePIfInButtonScope()
            reconstructFormatting()
            framesetOK = false
            genericTextElement(tag, state: .rawtext)
        case .iframe:
            framesetOK = false
            genericTextElement(tag, state: .rawtext)
        case .noembed:
            genericTextElement(tag, state: .rawtext)
        case .noscript where scripting:
            genericTextElement(tag, state: .rawtext)
        case .select:
            if let context, context.isElement(.select) { return }
            if hasInScope(.select) {
                popUntil(.select)
                return
            }
            reconstructFormatting()
            insertHTMLElement(tag)
            framesetOK = false
        case .option:
            if hasInScope(.select) {
                generateImpliedEndTags(except: .optgroup)
            } else if currentIs(.option) {
                pop()
            }
            reconstructFormatting()
            insertHTMLElement(tag)
        case .optgroup:
            if hasInScope(.select) {
                generateImpliedEndTags()
            } else if currentIs(.option) {
                pop()
            }
            reconstructFormatting()
            insertHTMLElement(tag)
        case .rb, .rtc:
            if hasInScope(.ruby) { generateImpliedEndTags() }
            insertHTMLElement(tag)
        case .rp, .rt:
            if hasInScope(.ruby) { generateImpliedEndTags(except: .rtc) }
            insertHTMLElement(tag)
        case .math, .svg:
            reconstructFormatting()
            var adjusted = tag
            let namespace: HTMLNamespace = tag.id == .math ? .mathml : .svg
            adjustForeignAttributes(&adjusted.attributes, namespace: namespace)
            insertForeignElement(adjusted, namespace: namespace)
            if tag.selfClosing { pop() }
        case .caption, .col, .colgroup, .frame, .head, .tbody, .td, .tfoot, .th, .thead, .tr:
            return
        default:
            reconstructFormatting()
            insertHTMLElement(tag)
        }
    }

    private mutating func inBodyEndTag(_ end: HTMLTag, token: HTMLToken) {
        if !Self.inBodyEndTagNames.contains(end.id) {
            anyOtherEndTag(end)
            return
        }
        switch end.id {
        case .template:
            inHeadMode(token)
        case .body, .html:
            guard hasInScope(.body) else { return }
            mode = .afterBody
            if end.id == .html { process(token, in: mode) }
        case .address, .article, .aside, .blockquote, .button, .center, .details, .dialog, .dir, .div,
            .dl, .fieldset, .figcaption, .figure, .footer, .header, .hgroup, .listing, .main, .menu, .nav,
            .ol, .pre, .search, .section, .summary, .ul:
            guard hasInScope(end.id) else { return }
            generateImpliedEndTags()
            popUntil(end.id)
        case .form:
            if !isOnStack(.template) {
                let node = formElement
                formElement = nil
                guard let node, hasNodeInScope(node) else { return }
                generateImpliedEndTags()
                if let index = stackIndex(of: node) { removeFromStack(at: index) }
            } else {
                guard hasInScope(.form) else { return }
                generateImpliedEndTags()
                popUntil(.form)
            }
        case .p:
            if !hasInScope(.p, .button) { insertHTMLElement(named: .p) }
            closePElement()
        case .li:
            guard hasInScope(.li, .listItem) else { return }
            generateImpliedEndTags(except: .li)
            popUntil(.li)
        case .dd, .dt:
            guard hasInScope(end.id) else { return }
            generateImpliedEndTags(except: end.id)
            popUntil(end.id)
        case .h1, .h2, .h3, .h4, .h5, .h6:
            guard hasAnyInScope([.h1, .h2, .h3, .h4, .h5, .h6]) else { return }
            generateImpliedEndTags()
            popUntil(anyOf: [.h1, .h2, .h3, .h4, .h5, .h6])
        case .a, .b, .big, .code, .em, .font, .i, .nobr, .s, .small, .strike, .strong, .tt, .u:
            if !adoptionAgency(end.id) { anyOtherEndTag(end) }
        case .applet, .marquee, .object:
            guard hasInScope(end.id) else { return }
            generateImpliedEndTags()
            popUntil(end.id)
            clearFormattingToLastMarker()
        case .br:
            inBodyStartTag(HTMLTag(name: "br"), token: .startTag(HTMLTag(name: "br")))
        default:
            anyOtherEndTag(end)
        }
    }

    private mutating func anyOtherEndTag(_ end: HTMLTag) {
        // Without such an element on the stack the walk below can only end in "ignore";
        // skipping it keeps stray end tags cheap on very deep stacks.
        guard isOnStack(end) else { return }
        var index = open.count - 1
        while index >= 0 {
            let node = open[index]
            if node.namespace == .html && node.id == end.id && (end.id != .other || node.name == end.name) {
                generateImpliedEndTags(except: end.id)
                while open.count > index { pop() }
                return
            }
            if isSpecial(node) { return }
            index -= 1
        }
    }

    private mutating func textMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            insertCharacters(bytes)
        case .nullCharacter:
            insertCharacters([0])
        case .endOfFile:
            pop()
            mode = originalMode
            process(token, in: mode)
        case .endTag:
            pop()
            mode = originalMode
        default:
            return
        }
    }

    private var currentIsTableLike: Bool {
        guard let node = currentNode, node.namespace == .html else { return false }
        switch node.id {
        case .table, .tbody, .template, .tfoot, .thead, .tr: return true
        default: return false
        }
    }

    private mutating func clearStackBack(to ids: HTMLTagSet) {
        while let node = currentNode, !(node.namespace == .html && ids.contains(node.id)) {
            pop()
        }
    }

    private static let tableContext: HTMLTagSet = [.table, .template, .html]
    private static let tableBodyContext: HTMLTagSet = [.tbody, .tfoot, .thead, .template, .html]
    private static let rowContext: HTMLTagSet = [.tr, .template, .html]

    private mutating func inTableMode(_ token: HTMLToken) {
        switch token {
        case .characters, .nullCharacter:
            if currentIsTableLike {
                pendingTableText = []
                pendingTableTextDirty = false
                originalMode = mode
                mode = .inTableText
                inTableTextMode(token)
            } else {
                inTableAnythingElse(token)
            }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag):
            switch tag.id {
            case .caption:
                clearStackBack(to: Self.tableContext)
                formatting.append(nil)
                insertHTMLElement(tag)
                mode = .inCaption
            case .colgroup:
                clearStackBack(to: Self.tableContext)
                insertHTMLElement(tag)
                mode = .inColumnGroup
            case .col:
                clearStackBack(to: Self.tableContext)
                insertHTMLElement(named: .colgroup)
                mode = .inColumnGroup
                process(token, in: mode)
            case .tbody, .tfoot, .thead:
                clearStackBack(to: Self.tableContext)
                insertHTMLElement(tag)
                mode = .inTableBody
            case .td, .th, .tr:
                clearStackBack(to: Self.tableContext)
                insertHTMLElement(named: .tbody)
                mode = .inTableBody
                process(token, in: mode)
            case .table:
                guard hasInScope(.table, .table) else { return }
                popUntil(.table)
                resetInsertionMode()
                process(token, in: mode)
            case .style, .script, .template:
                inHeadMode(token)
            case .input:
                let type = tag.attributes.first { $0.name == "type" }?.value.lowercasedASCII
                guard type == "hidden" else {
                    inTableAnythingElse(token)
                    return
                }
                insertHTMLElement(tag)
                pop()
            case .form:
                guard !isOnStack(.template), formElement == nil else { return }
                formElement = insertHTMLElement(tag)
                pop()
            default:
                inTableAnythingElse(token)
            }
        case .endTag(let name):
            switch name.id {
            case .table:
                guard hasInScope(.table, .table) else { return }
                popUntil(.table)
                resetInsertionMode()
            case .body, .caption, .col, .colgroup, .html, .tbody, .td, .tfoot, .th, .thead, .tr:
                return
            case .template:
                inHeadMode(token)
            default:
                inTableAnythingElse(token)
            }
        case .endOfFile:
            inBodyMode(token)
        }
    }

    private mutating func inTableAnythingElse(_ token: HTMLToken) {
        fosterParenting = true
        inBodyMode(token)
        fosterParenting = false
    }

    private mutating func inTableTextMode(_ token: HTMLToken) {
        switch token {
        case .nullCharacter:
            return
        case .characters(let bytes):
            if !pendingTableTextDirty && bytes.contains(where: { !isHTMLWhitespace($0) }) {
                pendingTableTextDirty = true
            }
            pendingTableText.append(contentsOf: bytes)
        default:
            let text = pendingTableText
            pendingTableText = []
            if !text.isEmpty {
                if pendingTableTextDirty {
                    inTableAnythingElse(.characters(text))
                } else {
                    insertCharacters(text)
                }
            }
            pendingTableTextDirty = false
            mode = originalMode
            process(token, in: mode)
        }
    }

    private mutating func inCaptionMode(_ token: HTMLToken) {
        switch token {
        case .endTag(let name) where name.id == .caption:
            closeCaption()
        case .startTag(let tag)
        where [.caption, .col, .colgroup, .tbody, .td, .tfoot, .th, .thead, .tr].contains(tag.id):
            if closeCaption() { process(token, in: mode) }
        case .endTag(let name) where name.id == .table:
            if closeCaption() { process(token, in: mode) }
        case .endTag(let name)
        where [.body, .col, .colgroup, .html, .tbody, .td, .tfoot, .th, .thead, .tr].contains(name.id):
            return
        default:
            inBodyMode(token)
        }
    }

    @discardableResult
    private mutating func closeCaption() -> Bool {
        guard hasInScope(.caption, .table) else { return false }
        generateImpliedEndTags()
        popUntil(.caption)
        clearFormattingToLastMarker()
        mode = .inTable
        return true
    }

    private mutating func inColumnGroupMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            handleWhitespacePrefix(bytes, insertWhitespace: true) { $0.inColumnGroupAnythingElse($1) }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .startTag(let tag) where tag.id == .col:
            insertHTMLElement(tag)
            pop()
        case .endTag(let name) where name.id == .colgroup:
            guard currentIs(.colgroup) else { return }
            pop()
            mode = .inTable
        case .endTag(let name) where name.id == .col:
            return
        case .startTag(let tag) where tag.id == .template:
            inHeadMode(token)
        case .endTag(let name) where name.id == .template:
            inHeadMode(token)
        case .endOfFile:
            inBodyMode(token)
        default:
            inColumnGroupAnythingElse(token)
        }
    }

    private mutating func inColumnGroupAnythingElse(_ token: HTMLToken) {
        guard currentIs(.colgroup) else { return }
        pop()
        mode = .inTable
        process(token, in: mode)
    }

    private mutating func inTableBodyMode(_ token: HTMLToken) {
        switch token {
        case .startTag(let tag) where tag.id == .tr:
            clearStackBack(to: Self.tableBodyContext)
            insertHTMLElement(tag)
            mode = .inRow
        case .startTag(let tag) where tag.id == .th || tag.id == .td:
            clearStackBack(to: Self.tableBodyContext)
            insertHTMLElement(named: .tr)
            mode = .inRow
            process(token, in: mode)
        case .endTag(let name) where name.id == .tbody || name.id == .tfoot || name.id == .thead:
            guard hasInScope(name.id, .table) else { return }
            clearStackBack(to: Self.tableBodyContext)
            pop()
            mode = .inTable
        case .startTag(let tag) where [.caption, .col, .colgroup, .tbody, .tfoot, .thead].contains(tag.id):
            inTableBodyLeave(token)
        case .endTag(let name) where name.id == .table:
            inTableBodyLeave(token)
        case .endTag(let name) where [.body, .caption, .col, .colgroup, .html, .td, .th, .tr].contains(name.id):
            return
        default:
            inTableMode(token)
        }
    }

    private mutating func inTableBodyLeave(_ token: HTMLToken) {
        guard hasAnyInScope([.tbody, .thead, .tfoot], .table) else { return }
        clearStackBack(to: Self.tableBodyContext)
        pop()
        mode = .inTable
        process(token, in: mode)
    }

    private mutating func inRowMode(_ token: HTMLToken) {
        switch token {
        case .startTag(let tag) where tag.id == .th || tag.id == .td:
            clearStackBack(to: Self.rowContext)
            insertHTMLElement(tag)
            mode = .inCell
            formatting.append(nil)
        case .endTag(let name) where name.id == .tr:
            guard hasInScope(.tr, .table) else { return }
            clearStackBack(to: Self.rowContext)
            pop()
            mode = .inTableBody
        case .startTag(let tag)
        where [.caption, .col, .colgroup, .tbody, .tfoot, .thead, .tr].contains(tag.id):
            inRowLeave(token)
        case .endTag(let name) where name.id == .table:
            inRowLeave(token)
        case .endTag(let name) where name.id == .tbody || name.id == .tfoot || name.id == .thead:
            guard hasInScope(name.id, .table) else { return }
            inRowLeave(token)
        case .endTag(let name) where [.body, .caption, .col, .colgroup, .html, .td, .th].contains(name.id):
            return
        default:
            inTableMode(token)
        }
    }

    private mutating func inRowLeave(_ token: HTMLToken) {
        guard hasInScope(.tr, .table) else { return }
        clearStackBack(to: Self.rowContext)
        pop()
        mode = .inTableBody
        process(token, in: mode)
    }

    private mutating func inCellMode(_ token: HTMLToken) {
        switch token {
        case .endTag(let name) where name.id == .td || name.id == .th:
            guard hasInScope(name.id, .table) else { return }
            generateImpliedEndTags()
            popUntil(name.id)
            clearFormattingToLastMarker()
            mode = .inRow
        case .startTag(let tag)
        where [.caption, .col, .colgroup, .tbody, .td, .tfoot, .th, .thead, .tr].contains(tag.id):
            guard hasAnyInScope([.td, .th], .table) else { return }
            closeCell()
            process(token, in: mode)
        case .endTag(let name) where [.body, .caption, .col, .colgroup, .html].contains(name.id):
            return
        case .endTag(let name) where [.table, .tbody, .tfoot, .thead, .tr].contains(name.id):
            guard hasInScope(name.id, .table) else { return }
            closeCell()
            process(token, in: mode)
        default:
            inBodyMode(token)
        }
    }

    private mutating func closeCell() {
        generateImpliedEndTags()
        popUntil(anyOf: [.td, .th])
        clearFormattingToLastMarker()
        mode = .inRow
    }

    private mutating func inTemplateMode(_ token: HTMLToken) {
        switch token {
        case .characters, .nullCharacter, .comment, .doctype:
            inBodyMode(token)
        case .startTag(let tag):
            let newMode: InsertionMode
            switch tag.id {
            case .base, .basefont, .bgsound, .link, .meta, .noframes, .script, .style, .template, .title:
                inHeadMode(token)
                return
            case .caption, .colgroup, .tbody, .tfoot, .thead: newMode = .inTable
            case .col: newMode = .inColumnGroup
            case .tr: newMode = .inTableBody
            case .td, .th: newMode = .inRow
            default: newMode = .inBody
            }
            if !templateModes.isEmpty { templateModes.removeLast() }
            templateModes.append(newMode)
            mode = newMode
            process(token, in: mode)
        case .endTag(let name) where name.id == .template:
            inHeadMode(token)
        case .endTag:
            return
        case .endOfFile:
            guard isOnStack(.template) else {
                stopParsing()
                return
            }
            popUntil(.template)
            clearFormattingToLastMarker()
            if !templateModes.isEmpty { templateModes.removeLast() }
            resetInsertionMode()
            process(token, in: mode)
        }
    }

    private mutating func afterBodyMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            let (space, rest) = splitLeadingWhitespace(bytes)
            if !space.isEmpty { inBodyMode(.characters(Array(space))) }
            if !rest.isEmpty { afterBodyAnythingElse(.characters(Array(rest))) }
        case .comment(let data):
            if let root = open.first { insertComment(data, into: root) }
        case .doctype:
            return
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .endTag(let name) where name.id == .html:
            if context != nil { return }
            mode = .afterAfterBody
        case .endOfFile:
            stopParsing()
        default:
            afterBodyAnythingElse(token)
        }
    }

    private mutating func afterBodyAnythingElse(_ token: HTMLToken) {
        mode = .inBody
        process(token, in: mode)
    }

    private mutating func inFramesetMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            let space = bytes.filter { isHTMLWhitespace($0) }
            if !space.isEmpty { insertCharacters(space) }
        case .comment(let data):
            insertComment(data)
        case .startTag(let tag):
            switch tag.id {
            case .html: inBodyMode(token)
            case .frameset: insertHTMLElement(tag)
            case .frame:
                insertHTMLElement(tag)
                pop()
            case .noframes: inHeadMode(token)
            default: return
            }
        case .endTag(let name) where name.id == .frameset:
            guard open.count > 1 else { return }
            pop()
            if context == nil && !currentIs(.frameset) { mode = .afterFrameset }
        case .endOfFile:
            stopParsing()
        default:
            return
        }
    }

    private mutating func afterFramesetMode(_ token: HTMLToken) {
        switch token {
        case .characters(let bytes):
            let space = bytes.filter { isHTMLWhitespace($0) }
            if !space.isEmpty { insertCharacters(space) }
        case .comment(let data):
            insertComment(data)
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .startTag(let tag) where tag.id == .noframes:
            inHeadMode(token)
        case .endTag(let name) where name.id == .html:
            mode = .afterAfterFrameset
        case .endOfFile:
            stopParsing()
        default:
            return
        }
    }

    private mutating func afterAfterBodyMode(_ token: HTMLToken) {
        switch token {
        case .comment(let data):
            insertComment(data, into: document)
        case .doctype:
            inBodyMode(token)
        case .characters(let bytes):
            let (space, rest) = splitLeadingWhitespace(bytes)
            if !space.isEmpty { inBodyMode(.characters(Array(space))) }
            if !rest.isEmpty { afterBodyAnythingElse(.characters(Array(rest))) }
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .endOfFile:
            stopParsing()
        default:
            afterBodyAnythingElse(token)
        }
    }

    private mutating func afterAfterFramesetMode(_ token: HTMLToken) {
        switch token {
        case .comment(let data):
            insertComment(data, into: document)
        case .doctype:
            inBodyMode(token)
        case .characters(let bytes):
            let space = bytes.filter { isHTMLWhitespace($0) }
            if !space.isEmpty { inBodyMode(.characters(space)) }
        case .startTag(let tag) where tag.id == .html:
            inBodyMode(token)
        case .startTag(let tag) where tag.id == .noframes:
            inHeadMode(token)
        case .endOfFile:
            stopParsing()
        default:
            return
        }
    }

    // MARK: - Foreign content

    private mutating func processForeign(_ token: HTMLToken) {
        switch token {
        case .nullCharacter:
            insertCharacters([0xEF, 0xBF, 0xBD])
        case .characters(let bytes):
            insertCharacters(bytes)
            if framesetOK && bytes.contains(where: { !isHTMLWhitespace($0) }) { framesetOK = false }
        case .comment(let data):
            insertComment(data)
        case .doctype:
            return
        case .startTag(let tag):
            if breaksOutOfForeignContent(tag) {
                popUntilHTMLOrIntegrationPoint()
                process(token, in: mode)
                return
            }
            guard let adjusted = adjustedCurrentNode else { return }
            let namespace = adjusted.namespace
            var tag = tag
            if namespace == .svg, let name = svgTagNameAdjustments[tag.name] { tag.name = name }
            adjustForeignAttributes(&tag.attributes, namespace: namespace)
            insertForeignElement(tag, namespace: namespace)
            if tag.selfClosing { pop() }
        case .endTag(let name):
            if name.id == .br || name.id == .p {
                popUntilHTMLOrIntegrationPoint()
                process(token, in: mode)
                return
            }
            var index = open.count - 1
            guard index >= 0 else { return }
            while true {
                let node = open[index]
                if index == 0 { return }
                if node.name.lowercasedASCII == name.name {
                    while open.count > index { pop() }
                    return
                }
                index -= 1
                if open[index].namespace == .html {
                    process(token, in: mode)
                    return
                }
            }
        case .endOfFile:
            process(token, in: mode)
        }
    }

    private mutating func popUntilHTMLOrIntegrationPoint() {
        while let node = currentNode, node.namespace != .html, !isMathMLTextIntegrationPoint(node),
            !isHTMLIntegrationPoint(node)
        {
            pop()
        }
    }
}
