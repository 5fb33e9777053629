import CofferKeychain
import NIOConcurrencyHelpers

/// A device state a test can change: lock, unlock, reboot, set or remove the passcode.
public final class TestDeviceState: DeviceState {
    private struct State {
        var isUnlocked = true
        var hasBeenUnlockedSinceBoot = true
        var isPasscodeSet = true
    }

    private let state = NIOLockedValueBox(State())

    /// Unlocked, past first unlock, with a passcode.
    public init() {}

    /// Whether the device is unlocked.
    public var isUnlocked: Bool { state.withLockedValue { $0.isUnlocked } }
    /// Whether the device was unlocked since boot.
    public var hasBeenUnlockedSinceBoot: Bool { state.withLockedValue { $0.hasBeenUnlockedSinceBoot } }
    /// Whether a passcode is set.
    public var isPasscodeSet: Bool { state.withLockedValue { $0.isPasscodeSet } }

    /// Locks the screen.
    public func lock() { state.withLockedValue { $0.isUnlocked = false } }
    /// Unlocks the screen.
    public func unlock() {
        state.withLockedValue {
            $0.isUnlocked = true
            $0.hasBeenUnlockedSinceBoot = true
        }
    }
    /// Restarts: locked and not yet unlocked since boot.
    public func reboot() {
        state.withLockedValue {
            $0.isUnlocked = false
            $0.hasBeenUnlockedSinceBoot = false
        }
    }
    /// Sets or removes the passcode.
    public func setPasscode(_ isSet: Bool) { state.withLockedValue { $0.isPasscodeSet = isSet } }
}
