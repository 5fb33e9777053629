// Element classifications and name adjustment tables from the HTML Standard §13.2.

/// Elements in the "special" category, HTML namespace.
let specialHTMLElements: HTMLTagSet = [
    .address, .applet, .area, .article, .aside, .base, .basefont, .bgsound, .blockquote, .body, .br,
    .button, .caption, .center, .col, .colgroup, .dd, .details, .dir, .div, .dl, .dt, .embed,
    .fieldset, .figcaption, .figure, .footer, .form, .frame, .frameset, .h1, .h2, .h3, .h4, .h5, .h6,
    .head, .header, .hgroup, .hr, .html, .iframe, .img, .input, .keygen, .li, .link, .listing, .main,
    .marquee, .menu, .meta, .nav, .noembed, .noframes, .noscript, .object, .ol, .p, .param, .plaintext,
    .pre, .script, .search, .section, .select, .source, .style, .summary, .table, .tbody, .td,
    .template, .textarea, .tfoot, .th, .thead, .title, .tr, .track, .ul, .wbr, .xmp,
]

/// Whether `node` is in the special category.
func isSpecial(_ node: HTMLNode) -> Bool {
    switch node.namespace {
    case .html: return specialHTMLElements.contains(node.id)
    case .mathml:
        switch node.id {
        case .mi, .mo, .mn, .ms, .mtext, .annotationXML: return true
        default: return false
        }
    case .svg:
        switch node.id {
        case .foreignObject, .desc, .title: return true
        default: return false
        }
    default: return false
    }
}

/// Formatting elements tracked in the list of active formatting elements.
func isFormattingName(_ id: HTMLTagID) -> Bool {
    switch id {
    case .a, .b, .big, .code, .em, .font, .i, .nobr, .s, .small, .strike, .strong, .tt, .u:
        return true
    default:
        return false
    }
}

/// Whether `node` is a MathML text integration point.
func isMathMLTextIntegrationPoint(_ node: HTMLNode) -> Bool {
    guard node.namespace == .mathml else { return false }
    switch node.id {
    case .mi, .mo, .mn, .ms, .mtext: return true
    default: return false
    }
}

/// Whether `node` is an HTML integration point.
func isHTMLIntegrationPoint(_ node: HTMLNode) -> Bool {
    switch node.namespace {
    case .mathml:
        guard node.id == .annotationXML else { return false }
        for attribute in node.attributes where attribute.name == "encoding" && attribute.namespace == nil {
            let value = attribute.value.lowercasedASCII
            return value == "text/html" || value == "application/xhtml+xml"
        }
        return false
    case .svg:
        return node.id == .foreignObject || node.id == .desc || node.id == .title
    default:
        return false
    }
}

extension String {
    /// The string with ASCII upper-case letters lowercased (other characters unchanged).
    var lowercasedASCII: String {
        var needs = false
        for byte in utf8 where byte >= 0x41 && byte <= 0x5A {
            needs = true
            break
        }
        guard needs else { return self }
        return String(decoding: utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}

/// SVG element names whose case is restored in foreign content.
let svgTagNameAdjustments: [String: String] = [
    "altglyph": "altGlyph", "altglyphdef": "altGlyphDef", "altglyphitem": "altGlyphItem",
    "animatecolor": "animateColor", "animatemotion": "animateMotion", "animatetransform": "animateTransform",
    "clippath": "clipPath", "feblend": "feBlend", "fecolormatrix": "feColorMatrix",
    "fecomponenttransfer": "feComponentTransfer", "fecomposite": "feComposite",
    "feconvolvematrix": "feConvolveMatrix", "fediffuselighting": "feDiffuseLighting",
    "fedisplacementmap": "feDisplacementMap", "fedistantlight": "feDistantLight", "fedropshadow": "feDropShadow",
    "feflood": "feFlood", "fefunca": "feFuncA", "fefuncb": "feFuncB", "fefuncg": "feFuncG", "fefuncr": "feFuncR",
    "fegaussianblur": "feGaussianBlur", "feimage": "feImage", "femerge": "feMerge", "femergenode": "feMergeNode",
    "femorphology": "feMorphology", "feoffset": "feOffset", "fepointlight": "fePointLight",
    "fespecularlighting": "feSpecularLighting", "fespotlight": "feSpotLight", "fetile": "feTile",
    "feturbulence": "feTurbulence", "foreignobject": "foreignObject", "glyphref": "glyphRef",
    "lineargradient": "linearGradient", "radialgradient": "radialGradient", "textpath": "textPath",
]

/// SVG attribute names whose case is restored in foreign content.
let svgAttributeAdjustments: [String: String] = [
    "attributename": "attributeName", "attributetype": "attributeType", "basefrequency": "baseFrequency",
    "baseprofile": "baseProfile", "calcmode": "calcMode", "clippathunits": "clipPathUnits",
    "diffuseconstant": "diffuseConstant", "edgemode": "edgeMode", "filterunits": "filterUnits",
    "glyphref": "glyphRef", "gradienttransform": "gradientTransform", "gradientunits": "gradientUnits",
    "kernelmatrix": "kernelMatrix", "kernelunitlength": "kernelUnitLength", "keypoints": "keyPoints",
    "keysplines": "keySplines", "keytimes": "keyTimes", "lengthadjust": "lengthAdjust",
    "limitingconeangle": "limitingConeAngle", "markerheight": "markerHeight", "markerunits": "markerUnits",
    "markerwidth": "markerWidth", "maskcontentunits": "maskContentUnits", "maskunits": "maskUnits",
    "numoctaves": "numOctaves", "pathlength": "pathLength", "patterncontentunits": "patternContentUnits",
    "patterntransform": "patternTransform", "patternunits": "patternUnits", "pointsatx": "pointsAtX",
    "pointsaty": "pointsAtY", "pointsatz": "pointsAtZ", "preservealpha": "preserveAlpha",
    "preserveaspectratio": "preserveAspectRatio", "primitiveunits": "primitiveUnits", "refx": "refX",
    "refy": "refY", "repeatcount": "repeatCount", "repeatdur": "repeatDur",
    "requiredextensions": "requiredExtensions", "requiredfeatures": "requiredFeatures",
    "specularconstant": "specularConstant", "specularexponent": "specularExponent",
    "spreadmethod": "spreadMethod", "startoffset": "startOffset", "stddeviation": "stdDeviation",
    "stitchtiles": "stitchTiles", "surfacescale": "surfaceScale", "systemlanguage": "systemLanguage",
    "tablevalues": "tableValues", "targetx": "targetX", "targety": "targetY", "textlength": "textLength",
    "viewbox": "viewBox", "viewtarget": "viewTarget", "xchannelselector": "xChannelSelector",
    "ychannelselector": "yChannelSelector", "zoomandpan": "zoomAndPan",
]

/// Adjusts attributes for an element in foreign content (SVG or MathML).
func adjustForeignAttributes(_ attributes: inout [HTMLAttribute], namespace: HTMLNamespace) {
    for index in attributes.indices {
        let name = attributes[index].name
        if namespace == .svg, let adjusted = svgAttributeAdjustments[name] {
            attributes[index].name = adjusted
        } else if namespace == .mathml && name == "definitionurl" {
            attributes[index].name = "definitionURL"
        }
        switch name {
        case "xlink:actuate", "xlink:arcrole", "xlink:href", "xlink:role", "xlink:show", "xlink:title", "xlink:type":
            attributes[index].prefix = "xlink"
            attributes[index].name = String(name.dropFirst(6))
            attributes[index].namespace = .xlink
        case "xml:lang", "xml:space":
            attributes[index].prefix = "xml"
            attributes[index].name = String(name.dropFirst(4))
            attributes[index].namespace = .xml
        case "xmlns":
            attributes[index].namespace = .xmlns
        case "xmlns:xlink":
            attributes[index].prefix = "xmlns"
            attributes[index].name = "xlink"
            attributes[index].namespace = .xmlns
        default:
            break
        }
    }
}

/// Start tags that break out of foreign content.
func breaksOutOfForeignContent(_ tag: HTMLTag) -> Bool {
    switch tag.id {
    case .b, .big, .blockquote, .body, .br, .center, .code, .dd, .div, .dl, .dt, .em, .embed, .h1,
        .h2, .h3, .h4, .h5, .h6, .head, .hr, .i, .img, .li, .listing, .menu, .meta, .nobr, .ol, .p,
        .pre, .ruby, .s, .small, .span, .strong, .strike, .sub, .sup, .table, .tt, .u, .ul, .`var`:
        return true
    case .font:
        return tag.attributes.contains { $0.name == "color" || $0.name == "face" || $0.name == "size" }
    default:
        return false
    }
}

/// Public identifier prefixes that put a document in quirks mode.
let quirkyPublicIdPrefixes: [String] = [
    "+//silmaril//dtd html pro v0r11 19970101//", "-//as//dtd html 3.0 aswedit + extensions//",
    "-//advasoft ltd//dtd html 3.0 aswedit + extensions//", "-//ietf//dtd html 2.0 level 1//",
    "-//ietf//dtd html 2.0 level 2//", "-//ietf//dtd html 2.0 strict level 1//",
    "-//ietf//dtd html 2.0 strict level 2//", "-//ietf//dtd html 2.0 strict//", "-//ietf//dtd html 2.0//",
    "-//ietf//dtd html 2.1e//", "-//ietf//dtd html 3.0//", "-//ietf//dtd html 3.2 final//",
    "-//ietf//dtd html 3.2//", "-//ietf//dtd html 3//", "-//ietf//dtd html level 0//",
    "-//ietf//dtd html level 1//", "-//ietf//dtd html level 2//", "-//ietf//dtd html level 3//",
    "-//ietf//dtd html strict level 0//", "-//ietf//dtd html strict level 1//",
    "-//ietf//dtd html strict level 2//", "-//ietf//dtd html strict level 3//", "-//ietf//dtd html strict//",
    "-//ietf//dtd html//", "-//metrius//dtd metrius presentational//",
    "-//microsoft//dtd internet explorer 2.0 html strict//", "-//microsoft//dtd internet explorer 2.0 html//",
    "-//microsoft//dtd internet explorer 2.0 tables//", "-//microsoft//dtd internet explorer 3.0 html strict//",
    "-//microsoft//dtd internet explorer 3.0 html//", "-//microsoft//dtd internet explorer 3.0 tables//",
    "-//netscape comm. corp.//dtd html//", "-//netscape comm. corp.//dtd strict html//",
    "-//o'reilly and associates//dtd html 2.0//", "-//o'reilly and associates//dtd html extended 1.0//",
    "-//o'reilly and associates//dtd html extended relaxed 1.0//",
    "-//sq//dtd html 2.0 hotmetal + extensions//",
    "-//softquad software//dtd hotmetal pro 6.0::19990601::extensions to html 4.0//",
    "-//softquad//dtd hotmetal pro 4.0::19971010::extensions to html 4.0//",
    "-//spyglass//dtd html 2.0 extended//", "-//sun microsystems corp.//dtd hotjava html//",
    "-//sun microsystems corp.//dtd hotjava strict html//", "-//w3c//dtd html 3 1995-03-24//",
    "-//w3c//dtd html 3.2 draft//", "-//w3c//dtd html 3.2 final//", "-//w3c//dtd html 3.2//",
    "-//w3c//dtd html 3.2s draft//", "-//w3c//dtd html 4.0 frameset//", "-//w3c//dtd html 4.0 transitional//",
    "-//w3c//dtd html experimental 19960712//", "-//w3c//dtd html experimental 970421//",
    "-//w3c//dtd w3 html//", "-//w3o//dtd w3 html 3.0//", "-//webtechs//dtd mozilla html 2.0//",
    "-//webtechs//dtd mozilla html//",
]

/// The document mode a DOCTYPE token selects.
func quirksMode(for doctype: HTMLDoctype) -> HTMLQuirksMode {
    if doctype.forceQuirks || doctype.name != "html" { return .quirks }
    let publicId = doctype.publicId?.lowercasedASCII
    let systemId = doctype.systemId?.lowercasedASCII
    if let publicId {
        if publicId == "-//w3o//dtd w3 html strict 3.0//en//" || publicId == "-/w3c/dtd html 4.0 transitional/en"
            || publicId == "html"
        {
            return .quirks
        }
        for prefix in quirkyPublicIdPrefixes where publicId.hasPrefix(prefix) { return .quirks }
        let html401 =
            publicId.hasPrefix("-//w3c//dtd html 4.01 frameset//")
            || publicId.hasPrefix("-//w3c//dtd html 4.01 transitional//")
        if systemId == nil && html401 { return .quirks }
        if publicId.hasPrefix("-//w3c//dtd xhtml 1.0 frameset//")
            || publicId.hasPrefix("-//w3c//dtd xhtml 1.0 transitional//")
        {
            return .limitedQuirks
        }
        if systemId != nil && html401 { return .limitedQuirks }
    }
    if systemId == "http://www.ibm.com/data/dtd/v11/ibmxhtml1-transitional.dtd" { return .quirks }
    return .noQuirks
}
