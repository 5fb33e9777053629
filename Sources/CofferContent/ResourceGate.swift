/// Decides, for one sanitizing pass, what every URL that would load something becomes, and
/// records what was blocked, loaded and embedded.
final class ResourceGate {
    /// What a resource URL becomes.
    enum Decision: Equatable {
        /// Keep it, with this (cleaned or rewritten) value.
        case keep(String)
        /// Blocked; the index into ``blocked``.
        case blocked(Int)
        /// Remove it: a forbidden scheme, a relative URL (mail has no base URL), an unusable
        /// `data:` type or an unknown content ID.
        case drop
    }

    private let options: MailSanitizer.Options
    private let cidResolver: CIDResolver?
    private var cidCache: [String: EmbeddedAttachment?] = [:]
    private(set) var blocked: [RemoteResource] = []
    private(set) var loaded: [RemoteResource] = []
    private(set) var embeddedCount = 0
    private(set) var missingContentIDs: [String] = []
    /// How many URLs were decided; a result computed while this stayed the same touched no URL and can be reused.
    private(set) var decisionCount = 0
    private var missingSet: Set<String> = []
    /// ``isTrackerHost(_:)``'s answers so far: a newsletter loads most of its images from a few hosts.
    private var trackerVerdicts: [String: Bool] = [:]

    init(options: MailSanitizer.Options, cidResolver: CIDResolver?) {
        self.options = options
        self.cidResolver = cidResolver
    }

    /// Whether `host` is, or is a subdomain of, a known tracker host.
    func isTrackerHost(_ host: String) -> Bool {
        if host.isEmpty { return false }
        if let verdict = trackerVerdicts[host] { return verdict }
        var candidate = Substring(host)
        var verdict = false
        while true {
            if options.trackerHosts.contains(String(candidate)) {
                verdict = true
                break
            }
            guard let dot = candidate.firstIndex(of: ".") else { break }
            candidate = candidate[candidate.index(after: dot)...]
        }
        trackerVerdicts[host] = verdict
        return verdict
    }

    private static func accepts(mediaType: String, for kind: RemoteResource.Kind) -> Bool {
        switch kind {
        case .image, .backgroundImage, .cssImage, .poster:
            return URLPolicy.rasterImageTypes.contains(mediaType)
        case .font:
            return URLPolicy.fontTypes.contains(mediaType)
        case .media:
            return mediaType.hasPrefix("audio/") || mediaType.hasPrefix("video/")
        }
    }

    private func remoteResource(
        _ url: String,
        kind: RemoteResource.Kind,
        element: String,
        attribute: String,
        looksHidden: Bool
    ) -> RemoteResource {
        let isTracker = looksHidden || isTrackerHost(URLPolicy.host(of: url))
        return RemoteResource(kind: kind, url: url, element: element, attribute: attribute, isTracker: isTracker)
    }

    /// How many resources were blocked and loaded so far; see ``rollBack(to:)``.
    var mark: (blocked: Int, loaded: Int) { (blocked.count, loaded.count) }

    /// Forgets the resources recorded since `mark`: a dropped CSS declaration loads nothing, and
    /// ``recordBlocked(_:kind:element:attribute:looksHidden:)`` records its remote URLs again as blocked.
    /// Only CSS uses this; its blocked URLs are written as `about:invalid`, never as indices.
    func rollBack(to mark: (blocked: Int, loaded: Int)) {
        // Nothing recorded since the mark (the common dropped declaration): the memo of style results stays usable.
        guard blocked.count != mark.blocked || loaded.count != mark.loaded else { return }
        decisionCount += 1
        blocked.removeSubrange(mark.blocked...)
        loaded.removeSubrange(mark.loaded...)
    }

    /// Records `raw` as blocked if it is a remote URL (of a declaration that was dropped).
    func recordBlocked(_ raw: String, kind: RemoteResource.Kind, element: String, attribute: String, looksHidden: Bool)
    {
        guard case .remote(let url) = URLPolicy.classify(URLPolicy.clean(raw)) else { return }
        decisionCount += 1
        blocked.append(
            remoteResource(url, kind: kind, element: element, attribute: attribute, looksHidden: looksHidden)
        )
    }

    /// Decides a URL that would load a resource of `kind`.
    ///
    /// - Parameter looksHidden: The element is tiny or hidden (a tracking pixel candidate).
    func decide(
        _ raw: String,
        kind: RemoteResource.Kind,
        element: String,
        attribute: String,
        looksHidden: Bool = false
    ) -> Decision {
        decisionCount += 1
        let cleaned = URLPolicy.clean(raw)
        switch URLPolicy.classify(cleaned) {
        case .data(let mediaType):
            return Self.accepts(mediaType: mediaType, for: kind) ? .keep(cleaned) : .drop
        case .inert:
            return .keep(cleaned)
        case .cid(let contentID):
            let attachment: EmbeddedAttachment?
            if let cached = cidCache[contentID] {
                attachment = cached
            } else {
                attachment = cidResolver?(contentID)
                cidCache[contentID] = attachment
            }
            if let attachment {
                let mediaType = CSSParser.fold(attachment.mediaType.split(separator: ";").first.map(String.init) ?? "")
                    .filter { $0 != " " }
                if Self.accepts(mediaType: mediaType, for: kind) {
                    embeddedCount += 1
                    return .keep("data:" + mediaType + ";base64," + URLPolicy.base64(attachment.data))
                }
                return .drop
            }
            if missingSet.insert(contentID).inserted { missingContentIDs.append(contentID) }
            return .drop
        case .remote(let url):
            let resource = remoteResource(
                url,
                kind: kind,
                element: element,
                attribute: attribute,
                looksHidden: looksHidden
            )
            let allowed =
                options.allowedRemoteURLs.contains(url)
                || (options.remoteContent == .allow && !(resource.isTracker && options.blockTrackers))
            if allowed {
                loaded.append(resource)
                return .keep(URLPolicy.absolute(url))
            }
            blocked.append(resource)
            return .blocked(blocked.count - 1)
        case .empty, .fragment, .relative, .other:
            return .drop
        }
    }
}
