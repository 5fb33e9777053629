/// What one drain of an account's outbox did.
public struct OutboxReport: Codable, Sendable, Equatable {
    /// Messages the submission server accepted.
    public var sent = 0
    /// Messages that failed for now and are queued again (a 4xx reply, a network fault), with backoff.
    public var retrying = 0
    /// Messages that failed for good (a 5xx reply, a certificate or pin failure, too many attempts): they stay in
    /// the outbox as failed, with the reason, until retried or cancelled.
    public var failed: [Failure] = []
    /// Sent messages whose copy is now in the server's Sent folder (and in the store).
    public var sentCopies = 0
    /// Why the Sent copies of sent messages could not be stored now (they are tried again at the next drain).
    public var sentCopyFailure: String?

    /// A message that failed for good.
    public struct Failure: Codable, Sendable, Equatable {
        /// The outbox item.
        public var id: Int64
        /// Its subject, as queued.
        public var subject: String
        /// Why, for the person (the server's reply or the check that failed; never a password).
        public var reason: String

        /// Creates one.
        package init(id: Int64, subject: String, reason: String) {
            self.id = id
            self.subject = subject
            self.reason = reason
        }
    }

    /// An empty report.
    public init() {}
}
