/// The Content Security Policies a message page is shown under. The exact strings are listed
/// in `docs/SANITIZER.md` and pinned by unit tests.
public enum ContentSecurityPolicy: Sendable, Hashable {
    /// Before sanitizing (raw source, unknown content): nothing loads, no script, no styles.
    case unsanitized
    /// A sanitized body with embedded (`data:`) images only: inline styles, `data:` images,
    /// fonts and media; nothing from the network.
    case embeddedImagesOnly
    /// A sanitized body with remote content allowed: as ``embeddedImagesOnly`` plus images,
    /// fonts and media over `https:` and `http:`. Still no script, no frames, no connections.
    case remoteContent
    /// The composer: the editor's inline script, identified by its nonce, and nothing else
    /// but the inline styles and `data:` images of the content being edited.
    case composer(nonce: String)

    /// The policy as an HTTP `Content-Security-Policy` header value.
    ///
    /// The header form adds `frame-ancestors 'none'` and a `sandbox` directive, which a
    /// `<meta>` element cannot carry.
    public var headerValue: String {
        switch self {
        case .unsanitized:
            return metaContent + "; frame-ancestors 'none'; sandbox"
        case .embeddedImagesOnly, .remoteContent:
            return metaContent + "; frame-ancestors 'none'; sandbox allow-popups allow-popups-to-escape-sandbox"
        case .composer:
            return metaContent + "; frame-ancestors 'none'"
        }
    }

    /// The policy as the `content` of a `<meta http-equiv="Content-Security-Policy">` element.
    public var metaContent: String {
        switch self {
        case .unsanitized:
            return "default-src 'none'; base-uri 'none'; form-action 'none'"
        case .embeddedImagesOnly:
            return "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; media-src data:; "
                + "base-uri 'none'; form-action 'none'"
        case .remoteContent:
            return "default-src 'none'; style-src 'unsafe-inline'; img-src data: https: http:; "
                + "font-src data: https: http:; media-src data: https: http:; base-uri 'none'; form-action 'none'"
        case .composer(let nonce):
            return "default-src 'none'; script-src 'nonce-\(Self.nonceCharacters(nonce))'; "
                + "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
        }
    }

    /// The `<meta>` element that applies the policy; it must be the first element of `<head>`.
    public var metaTag: String {
        "<meta http-equiv=\"Content-Security-Policy\" content=\"\(metaContent)\">"
    }

    /// A nonce reduced to base64 characters, so it cannot break out of the policy.
    static func nonceCharacters(_ nonce: String) -> String {
        String(
            nonce.unicodeScalars.filter { scalar in
                switch scalar {
                case "A"..."Z", "a"..."z", "0"..."9", "+", "/", "=", "-", "_": return true
                default: return false
                }
            }.map(Character.init)
        )
    }
}

/// Builds the self-contained page a message is shown in.
public enum MailPage {
    /// The style the page gives the container: content positioned inside it stays inside it
    /// and cannot cover the rest of the viewer.
    public static let containerStyle =
        "html body div.coffer-message{position:relative!important;overflow:auto!important;"
        + "contain:layout paint!important}"

    /// A complete HTML page for a sanitized message, under the policy it needs.
    ///
    /// - Parameters:
    ///   - message: The sanitized body.
    ///   - title: The page title (the subject), escaped.
    ///   - policy: The policy; by default ``SanitizedMessage/contentSecurityPolicy``.
    public static func render(
        _ message: SanitizedMessage,
        title: String = "",
        policy: ContentSecurityPolicy? = nil
    ) -> String {
        render(bodyHTML: message.html, title: title, policy: policy ?? message.contentSecurityPolicy)
    }

    /// A complete HTML page around an already sanitized fragment. The policy's `<meta>` is the
    /// first element in `<head>`, before anything that could load or run.
    public static func render(bodyHTML: String, title: String, policy: ContentSecurityPolicy) -> String {
        var page = "<!DOCTYPE html>\n<html><head>"
        page += policy.metaTag
        page += "<meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\">"
        page += "<title>" + escape(title) + "</title>"
        page += "<style>" + containerStyle + "</style>"
        page += "</head><body><div class=\"" + CSSFilter.containerClass + "\">"
        page += bodyHTML
        page += "</div></body></html>\n"
        return page
    }

    static func escape(_ text: String) -> String {
        var result = ""
        for char in text {
            switch char {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(char)
            }
        }
        return result
    }
}
