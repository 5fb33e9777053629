import CofferContent
import Foundation

/// Sanitizes an HTML body into a self-contained page: shared by the dispatcher's message preview and `coffer render`.
public enum MessagePage {
    /// A page and what the sanitizer reported about it.
    public struct Rendered: Sendable {
        /// The page, its CSP as its first `<meta>`.
        public var page: String
        /// What the sanitizer found.
        public var sanitized: SanitizedMessage
    }

    /// Sanitizes `html` (or, when there is none, the plain `text` in a `<pre>`) and wraps it in a page whose first
    /// `<meta>` is the Content Security Policy the result needs. `cid:` images are inlined through `resolver`.
    public static func render(
        html: [UInt8]?,
        text: String?,
        title: String,
        allowRemote: Bool,
        resolver: CIDResolver?
    ) -> Rendered {
        var sanitizer = MailSanitizer()
        if allowRemote { sanitizer = sanitizer.allowingRemoteContent() }
        let body = html ?? Array(("<pre>" + escape(text ?? "") + "</pre>").utf8)
        let sanitized = sanitizer.sanitize(html: body, cidResolver: resolver)
        return Rendered(page: MailPage.render(sanitized, title: title), sanitized: sanitized)
    }

    /// A resolver over a message's parts: exact Content-ID first, then ignoring case.
    public static func resolver(_ parts: [(contentID: String, mediaType: String, data: [UInt8])]) -> CIDResolver {
        var exact: [String: EmbeddedAttachment] = [:]
        var folded: [String: EmbeddedAttachment] = [:]
        for part in parts {
            let attachment = EmbeddedAttachment(mediaType: part.mediaType, data: part.data)
            if exact[part.contentID] == nil { exact[part.contentID] = attachment }
            if folded[part.contentID.lowercased()] == nil { folded[part.contentID.lowercased()] = attachment }
        }
        return { id in exact[id] ?? folded[id.lowercased()] }
    }

    /// The lines a viewer would show about blocked content, for standard error.
    public static func report(_ sanitized: SanitizedMessage, allowRemote: Bool) -> [String] {
        var lines: [String] = []
        let blocked = sanitized.blockedRemoteContentCount
        let trackers = sanitized.trackersBlocked.count
        if allowRemote {
            lines.append(
                "\(sanitized.loadedRemoteContent.count) remote \(plural(sanitized.loadedRemoteContent.count, "resource")) allowed"
            )
            lines.append("\(trackers) \(plural(trackers, "tracker")) blocked")
        } else {
            var line = "\(blocked) remote \(plural(blocked, "resource")) blocked"
            if trackers > 0 { line += " (\(trackers) \(plural(trackers, "tracker")))" }
            lines.append(line)
        }
        if sanitized.embeddedImageCount > 0 {
            lines.append("\(sanitized.embeddedImageCount) embedded \(plural(sanitized.embeddedImageCount, "image"))")
        }
        if !sanitized.missingContentIDs.isEmpty {
            lines.append("missing embedded parts: \(sanitized.missingContentIDs.joined(separator: ", "))")
        }
        return lines
    }

    private static func plural(_ count: Int, _ word: String) -> String { count == 1 ? word : word + "s" }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
