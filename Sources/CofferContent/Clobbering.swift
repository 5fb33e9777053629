/// DOM clobbering protection: `id` and `name` values that equal a property of `window`,
/// `document`, a form or an element (`location`, `cookie`, `submit`, `attributes`, …) get the
/// ``prefix``, so `<img name=cookie>` can never shadow `document.cookie` in a page that runs
/// script (the composer). References to such ids (`href="#…"`, `usemap`, CSS `#id`) are
/// rewritten the same way.
enum Clobbering {
    /// The prefix given to clobbering-prone names.
    static let prefix = "coffer-"

    /// Properties of `window`, `document`, `HTMLFormElement`, `Element`, `Node` and
    /// `Object.prototype` that markup could shadow through named access.
    static let proneNames: Set<String> = [
        // Object.prototype and global constructors.
        "__proto__", "constructor", "prototype", "toString", "valueOf", "hasOwnProperty", "isPrototypeOf",
        "propertyIsEnumerable", "toLocaleString", "__defineGetter__", "__defineSetter__", "__lookupGetter__",
        "__lookupSetter__", "Object", "Function", "Array", "String", "Number", "Boolean", "Symbol", "Promise",
        "JSON", "Math", "Reflect", "Proxy", "eval", "alert", "confirm", "prompt", "fetch", "XMLHttpRequest",
        "setTimeout", "setInterval", "clearTimeout", "clearInterval", "requestAnimationFrame", "queueMicrotask",
        "postMessage", "structuredClone", "atob", "btoa", "encodeURIComponent", "decodeURIComponent", "escape",
        "unescape", "isNaN", "parseInt", "parseFloat", "undefined", "NaN", "Infinity", "globalThis",
        // window.
        "window", "self", "top", "parent", "frames", "opener", "frameElement", "length", "name", "status",
        "closed", "document", "location", "history", "navigator", "screen", "localStorage", "sessionStorage",
        "indexedDB", "crypto", "performance", "console", "origin", "event", "external", "customElements",
        "trustedTypes", "open", "close", "print", "stop", "focus", "blur", "scroll", "scrollTo", "scrollBy",
        "getComputedStyle", "getSelection", "matchMedia", "innerWidth", "innerHeight", "devicePixelRatio",
        // document.
        "activeElement", "adoptNode", "all", "anchors", "applets", "body", "characterSet", "charset",
        "childElementCount", "compatMode", "contentType", "cookie", "createAttribute", "createComment",
        "createDocumentFragment", "createElement", "createElementNS", "createEvent", "createNodeIterator",
        "createRange", "createTextNode", "createTreeWalker", "currentScript", "defaultView", "designMode",
        "dir", "doctype", "documentElement", "documentURI", "domain", "elementFromPoint", "embeds",
        "evaluate", "execCommand", "fonts", "forms", "fullscreenElement", "getElementById",
        "getElementsByClassName", "getElementsByName", "getElementsByTagName", "getElementsByTagNameNS",
        "hasFocus", "head", "hidden", "images", "implementation", "importNode", "inputEncoding",
        "lastModified", "links", "plugins", "readyState", "referrer", "scripts", "scrollingElement",
        "styleSheets", "title", "URL", "visibilityState", "write", "writeln", "querySelector",
        "querySelectorAll", "defaultCharset",
        // Node and Element.
        "appendChild", "attributes", "baseURI", "childNodes", "children", "classList", "className",
        "cloneNode", "compareDocumentPosition", "contains", "dataset", "firstChild", "firstElementChild",
        "getAttribute", "getAttributeNode", "getAttributeNS", "getBoundingClientRect", "getRootNode",
        "hasAttribute", "hasAttributes", "hasChildNodes", "id", "innerHTML", "innerText", "insertAdjacentHTML",
        "insertBefore", "isConnected", "isEqualNode", "isSameNode", "lastChild", "lastElementChild",
        "localName", "lookupNamespaceURI", "matches", "namespaceURI", "nextElementSibling", "nextSibling",
        "nodeName", "nodeType", "nodeValue", "normalize", "outerHTML", "ownerDocument", "parentElement",
        "parentNode", "prefix", "previousElementSibling", "previousSibling", "remove", "removeAttribute",
        "removeAttributeNode", "removeChild", "replaceChild", "replaceChildren", "replaceWith", "setAttribute",
        "setAttributeNode", "setAttributeNS", "shadowRoot", "style", "tagName", "textContent",
        "addEventListener", "removeEventListener", "dispatchEvent", "click", "after", "before", "append",
        "prepend", "closest",
        // HTMLFormElement.
        "acceptCharset", "action", "autocomplete", "checkValidity", "elements", "encoding", "enctype",
        "item", "method", "namedItem", "noValidate", "reportValidity", "requestSubmit", "reset", "submit",
        "target", "rel", "relList",
    ]

    /// Whether a value would shadow a DOM property.
    static func isProne(_ value: String) -> Bool {
        proneNames.contains(value)
    }

    /// The value to write for an `id` or `name`: prefixed when clobbering-prone.
    static func safeID(_ value: String) -> String {
        isProne(value) ? prefix + value : value
    }
}
