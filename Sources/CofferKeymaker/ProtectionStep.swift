/// The steps of a protection change (login, logout, adding or removing a strategy). A test hook can stop a change
/// after any of them, as a crash would; ``Keymaker/recover()`` must then reach a consistent state.
public enum ProtectionStep: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The MainKey was written under the `none` strategy.
    case noneWritten = "none-written"
    /// The protection record (the commit point) was written.
    case recordWritten = "record-written"
    /// Every wrap of a logout was deleted.
    case wrapsDeleted = "wraps-deleted"
    /// The secure element key of a logout was deleted.
    case elementKeyDeleted = "element-key-deleted"
    /// The attempt record of a new PIN was written.
    case attemptsWritten = "attempts-written"
    /// A new wrap was written.
    case wrapWritten = "wrap-written"
    /// A secure element key was created.
    case elementKeyCreated = "element-key-created"
    /// Wraps and records of removed strategies were deleted.
    case leftoversRemoved = "leftovers-removed"

    /// The step's name.
    public var description: String { rawValue }
}
