/// A message part that a `cid:` URL refers to, returned by the caller's resolver.
public struct EmbeddedAttachment: Sendable, Hashable {
    /// The part's media type, for example `image/png`.
    public var mediaType: String
    /// The decoded part body.
    public var data: [UInt8]

    /// Creates an embedded attachment.
    public init(mediaType: String, data: [UInt8]) {
        self.mediaType = mediaType
        self.data = data
    }
}

/// Resolves the content ID of a `cid:` URL (percent-decoding done, no angle brackets) to the
/// message's own attachment, or `nil` when the message has no such part.
public typealias CIDResolver = (String) -> EmbeddedAttachment?

/// A URL in the message that would load something from the network.
public struct RemoteResource: Sendable, Hashable {
    /// What the URL would load.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// An `<img>` `src`/`srcset` or a `<picture>` `<source>`.
        case image
        /// A `background` attribute (`body`, `table`, `td`, …).
        case backgroundImage
        /// A CSS `url()`, `image()` or `image-set()` in a `style` attribute or `<style>` element.
        case cssImage
        /// A web font from `@font-face`.
        case font
        /// Audio or video: `<video>`/`<audio>`/`<source>` `src`.
        case media
        /// A video poster image.
        case poster
    }

    /// What the URL would load.
    public var kind: Kind
    /// The URL as written (cleaned of whitespace and control characters).
    public var url: String
    /// The element that refers to it (`img`, `td`, `style`, …).
    public var element: String
    /// The attribute (`src`, `srcset`, `background`, `poster`) or CSS property that holds it.
    public var attribute: String
    /// Whether it looks like a tracking pixel: a tiny or hidden image, or a known tracker host.
    public var isTracker: Bool

    /// Creates a remote resource record.
    public init(kind: Kind, url: String, element: String, attribute: String, isTracker: Bool) {
        self.kind = kind
        self.url = url
        self.element = element
        self.attribute = attribute
        self.isTracker = isTracker
    }

    /// The URL's host, lowercased (empty if it has none).
    public var host: String { URLPolicy.host(of: url) }
}

/// Whether remote content loads.
public enum RemoteContentMode: Sendable, Hashable {
    /// Nothing remote loads; every remote URL is rewritten to an inert attribute and reported.
    case block
    /// Remote content loads ("auto show images"), except tracking pixels while
    /// ``MailSanitizer/Options/blockTrackers`` is on.
    case allow
}

/// The result of sanitizing a message body.
public struct SanitizedMessage: Sendable, Hashable {
    /// The sanitized body as an HTML fragment, to be placed inside the message container
    /// (`<div class="coffer-message">`, see ``MailPage``). `<style>` rules are already scoped
    /// to that container.
    public var html: String
    /// Remote resources that were not loaded, in document order. Each blocked attribute was
    /// renamed to `data-coffer-blocked-<attribute>` with the resource's index in this list as
    /// its value; each blocked CSS URL was replaced with `about:invalid`.
    public var blockedRemoteContent: [RemoteResource]
    /// Remote resources left in place because remote content is allowed.
    public var loadedRemoteContent: [RemoteResource]
    /// Number of `cid:` references rendered as `data:` URLs.
    public var embeddedImageCount: Int
    /// Content IDs referenced by the body that the resolver did not know (their URLs were removed).
    public var missingContentIDs: [String]

    /// Creates a result (normally made by ``MailSanitizer``).
    public init(
        html: String,
        blockedRemoteContent: [RemoteResource] = [],
        loadedRemoteContent: [RemoteResource] = [],
        embeddedImageCount: Int = 0,
        missingContentIDs: [String] = []
    ) {
        self.html = html
        self.blockedRemoteContent = blockedRemoteContent
        self.loadedRemoteContent = loadedRemoteContent
        self.embeddedImageCount = embeddedImageCount
        self.missingContentIDs = missingContentIDs
    }

    /// The blocked resources that look like tracking pixels.
    public var trackersBlocked: [RemoteResource] { blockedRemoteContent.filter(\.isTracker) }

    /// How many remote resources were blocked ("14 remote images blocked").
    public var blockedRemoteContentCount: Int { blockedRemoteContent.count }

    /// The Content Security Policy to show this body under: ``ContentSecurityPolicy/remoteContent``
    /// if it loads remote content, else ``ContentSecurityPolicy/embeddedImagesOnly``.
    public var contentSecurityPolicy: ContentSecurityPolicy {
        loadedRemoteContent.isEmpty ? .embeddedImagesOnly : .remoteContent
    }
}
