import CofferAgentProtocol
import CofferAttachments
import CofferKeychain
import CofferKeymaker
import CofferStore
import Logging

// The seeds' `Has<Name>` protocols, one property each, written by hand (there is no code generator in the
// toolchain). A class declares `typealias Dependencies = HasA & HasB` and sees only those. Properties that a
// factory may fail to make are `throws`; a plain stored value witnesses them too.

/// Where the home's files are.
public protocol HasPaths: Sendable { var paths: AppPaths { get } }
/// The device identity (secret and machine id).
public protocol HasDeviceIdentity: Sendable { var deviceIdentity: DeviceIdentity { get throws } }
/// The keychain.
public protocol HasKeychain: Sendable { var keychain: any Keychain { get throws } }
/// The secure element, if the device has one.
public protocol HasSecureElement: Sendable { var secureElement: (any SecureElement)? { get throws } }
/// The clocks autolock and the attempt guard use.
public protocol HasClock: Sendable { var clock: any KeymakerClock { get throws } }
/// The device's lock state, which gates keychain accessibility classes.
public protocol HasDeviceState: Sendable { var deviceState: any DeviceState { get throws } }
/// The Keymakers (and user containers) of every account the process has opened.
public protocol HasKeymakerRegistry: Sendable { var keymakerRegistry: KeymakerRegistry { get throws } }
/// The logger.
public protocol HasLogger: Sendable { var logger: Logger { get throws } }
/// The account a user container serves.
public protocol HasAccount: Sendable { var account: String { get } }
/// One account's Keymaker.
public protocol HasKeymaker: Sendable { var keymaker: Keymaker { get throws } }
/// One account's mail store.
public protocol HasMailStore: Sendable { var mailStore: MailStore { get throws } }
/// The push sessions' tokens opened so far.
public protocol HasPushTokens: Sendable { var pushTokens: PushTokens { get throws } }
/// One account's attachment cache.
public protocol HasAttachmentCache: Sendable { var attachmentCache: AttachmentCache { get throws } }
/// One account's key source (its Keymaker, and a key granted to a background job).
public protocol HasAccountKeys: Sendable { var accountKeys: AccountKeys { get throws } }
/// Drops one account's store and cache instances with their derived keys.
public protocol HasMailStateReset: Sendable { func resetMailState() }
/// The owner of one account's background work.
public protocol HasAccountCoordinator: Sendable { var coordinator: AccountCoordinator { get throws } }
/// The outbox's wake-ups (``GlobalContainer/outboxEvents``).
public protocol HasOutboxEvents: Sendable { var outboxEvents: AccountEvents { get throws } }
