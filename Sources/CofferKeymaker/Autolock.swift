/// When the MainKey leaves memory on its own.
public enum AutolockPolicy: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Never: only an explicit lock removes the key.
    case never
    /// When the app goes to the background (`coffer background`, SIGUSR1 to the agent).
    case onBackground
    /// After this many seconds without use.
    case after(seconds: Int)

    /// The most private policy, used when a stored policy cannot be read: lock after one minute without use.
    public static let mostPrivate = AutolockPolicy.after(seconds: 60)

    /// `never`, `background` or for example `5m`.
    public var description: String {
        switch self {
        case .never: "never"
        case .onBackground: "background"
        case .after(let seconds):
            seconds % 3600 == 0 ? "\(seconds / 3600)h" : seconds % 60 == 0 ? "\(seconds / 60)m" : "\(seconds)s"
        }
    }

    /// Parses `never`, `background`, or a duration such as `30s`, `5m`, `1h`; `nil` otherwise.
    public init?(parsing text: String) {
        switch text {
        case "never": self = .never
        case "background", "on-background": self = .onBackground
        default:
            guard let unit = text.last, let value = Int(text.dropLast()), value > 0, value <= 7 * 24 * 3600 else {
                return nil
            }
            switch unit {
            case "s": self = .after(seconds: value)
            case "m": self = .after(seconds: value * 60)
            case "h": self = .after(seconds: value * 3600)
            default: return nil
            }
        }
    }
}

/// The autolock state machine: pure, no clocks or timers of its own. The Keymaker feeds it events with clock
/// readings and performs the actions it returns.
///
/// While unlocked under an interval policy it asks to be woken at the deadline, and at least every
/// ``heartbeatSeconds``, so a wall-clock jump against the boot clock (someone setting the clock back to keep a key
/// alive, or forward) is noticed and locks at once.
public struct Autolock: Sendable, Equatable {
    /// What the owner must do next.
    public enum Action: Sendable, Equatable {
        /// Nothing to schedule (locked, or a policy without deadline).
        case none
        /// Call ``Autolock/tick(_:)`` again when the boot clock reaches this value.
        case wake(atBoot: UInt64)
        /// Remove the key now.
        case lockNow(LockReason)
    }

    /// Seconds between clock-consistency checks while unlocked under an interval policy.
    public static let heartbeatSeconds: UInt64 = 30
    /// How far the wall clock may drift from the boot clock between two readings before it counts as tampering.
    public static let toleranceSeconds: Int64 = 120

    /// The policy in force.
    public private(set) var policy: AutolockPolicy
    /// Whether the key is in memory.
    public private(set) var isUnlocked = false
    /// Boot-clock deadline of the interval policy, if unlocked under one.
    public private(set) var deadline: UInt64?
    private var lastReading: ClockReading?

    /// A locked machine with `policy`.
    public init(policy: AutolockPolicy) { self.policy = policy }

    /// The key was obtained.
    public mutating func unlocked(_ now: ClockReading) -> Action {
        isUnlocked = true
        lastReading = now
        return reschedule(now)
    }

    /// The key was used: the interval restarts.
    public mutating func activity(_ now: ClockReading) -> Action {
        guard isUnlocked else { return .none }
        if let tampered = checkClocks(now) { return tampered }
        return reschedule(now)
    }

    /// The key was removed for any reason.
    public mutating func locked() {
        isUnlocked = false
        deadline = nil
        lastReading = nil
    }

    /// The app went to the background.
    public mutating func enteredBackground(_ now: ClockReading) -> Action {
        guard isUnlocked else { return .none }
        if policy == .onBackground { return .lockNow(.background) }
        return checkClocks(now) ?? .none
    }

    /// The policy changed.
    public mutating func policyChanged(to policy: AutolockPolicy, _ now: ClockReading) -> Action {
        self.policy = policy
        guard isUnlocked else { return .none }
        return reschedule(now)
    }

    /// A scheduled wake-up (or any periodic check) happened.
    public mutating func tick(_ now: ClockReading) -> Action {
        guard isUnlocked else { return .none }
        if let tampered = checkClocks(now) { return tampered }
        if let deadline, now.boot >= deadline { return .lockNow(.timeout) }
        return nextWake(now)
    }

    private mutating func reschedule(_ now: ClockReading) -> Action {
        if case .after(let seconds) = policy {
            deadline = now.boot + UInt64(seconds) * 1_000_000_000
        } else {
            deadline = nil
        }
        return nextWake(now)
    }

    private func nextWake(_ now: ClockReading) -> Action {
        guard let deadline else { return .none }
        return .wake(atBoot: min(deadline, now.boot + Self.heartbeatSeconds * 1_000_000_000))
    }

    /// Compares the wall clock's progress with the boot clock's since the last reading.
    private mutating func checkClocks(_ now: ClockReading) -> Action? {
        defer { lastReading = now }
        guard case .after = policy, let last = lastReading else { return nil }
        let bootElapsed = Int64(clamping: now.boot &- last.boot)
        let wallElapsed = now.wall - last.wall
        if now.boot < last.boot || abs(wallElapsed - bootElapsed) > Self.toleranceSeconds * 1_000_000_000 {
            return .lockNow(.clockTampered)
        }
        return nil
    }
}
