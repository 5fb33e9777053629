import CofferAgentProtocol
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferKeymakerTPM
import Logging

/// The hardware the composition root hands to each Keymaker (its PIN binder) and to the secure element (its
/// sealer): this machine's TPM, or none. The Keymaker itself knows no TPM (it builds without libtss2).
public struct KeymakerHardware: Sendable {
    /// Where a PIN can be bound (`protect pin --tpm`), or `nil`.
    public var pinBinder: (any PINBinder)?
    /// What seals the secure element's key file, or `nil`.
    public var sealer: (any HardwareSealer)?

    /// The given parts.
    public init(pinBinder: (any PINBinder)?, sealer: (any HardwareSealer)?) {
        self.pinBinder = pinBinder
        self.sealer = sealer
    }

    /// No hardware: software PINs and a software secure element only.
    public static let none = KeymakerHardware(pinBinder: nil, sealer: nil)

    /// This machine's TPM: `COFFER_TPM_TCTI` if set, else `/dev/tpmrm0` when it exists, else none. Nothing is
    /// opened until a call needs the TPM.
    public static var thisMachine: KeymakerHardware {
        KeymakerHardware(pinBinder: TPMPINBinder.fromEnvironment(), sealer: TPMKeySealer.fromEnvironment())
    }
}

/// What the whole process shares: keychain, clock, device state and identity, secure element, logger, and the
/// registry of accounts' Keymakers. Classes receive the container and see it only through their `Dependencies`.
public final class GlobalContainer: Sendable {
    /// Where the files are.
    public let paths: AppPaths
    /// The factories' instances and overrides.
    public let storage = FactoryStorage(level: .global)
    /// The Keymaker tunables new Keymakers get.
    public let keymakerConfiguration: Keymaker.Configuration
    /// The TPM (or none) every Keymaker and the secure element get.
    public let hardware: KeymakerHardware
    private let baseLogger: Logger

    /// A container for the home at `paths`. Nothing is opened until a factory is resolved.
    ///
    /// - Parameters:
    ///   - paths: The home.
    ///   - logger: The process's logger (libraries accept one; they do not make one).
    ///   - keymakerConfiguration: Tunables for every Keymaker. Without an `onDestroy` action, a destroyed
    ///     MainKey (logout, too many wrong PINs) deletes the account's mail folder, `paths.mail(account)`.
    ///   - hardware: The TPM the Keymakers bind PINs to and the secure element seals its key with; by default this
    ///     machine's (``KeymakerHardware/thisMachine``).
    public init(
        paths: AppPaths,
        logger: Logger,
        keymakerConfiguration: Keymaker.Configuration = .init(),
        hardware: KeymakerHardware = .thisMachine
    ) {
        self.paths = paths
        self.hardware = hardware
        self.baseLogger = logger
        var configuration = keymakerConfiguration
        if configuration.onDestroy == nil {
            configuration.onDestroy = { account in SecureFile.removeTree(paths.mail(account)) }
        }
        self.keymakerConfiguration = configuration
    }

    /// The device identity, loaded once; created only while the keychain has no items (never over a lost secret).
    public var deviceIdentityFactory: Factory<DeviceIdentity> {
        Factory(storage, scope: .shared) { [paths] in
            try DeviceIdentity.loadOrCreate(secretPath: paths.deviceSecret, keychainFolder: paths.keychain)
        }
    }

    /// The file keychain, sealed to the device.
    public var keychainFactory: Factory<any Keychain> {
        Factory(storage, scope: .shared) { [self] in
            try FileKeychain(folder: paths.keychain, device: deviceIdentity, state: deviceState)
        }
    }

    /// The software secure element; presence is confirmed through ``PresenceRelay``.
    public var secureElementFactory: Factory<any SecureElement> {
        Factory(storage, scope: .shared) { [self] in
            try SoftwareSecureElement(
                folder: paths.secureElement,
                device: deviceIdentity,
                presence: PresenceRelay(),
                sealer: hardware.sealer
            ) as any SecureElement
        }
    }

    /// The system clocks.
    public var clockFactory: Factory<any KeymakerClock> { Factory(storage, scope: .shared) { SystemClock() } }

    /// The device state.
    public var deviceStateFactory: Factory<any DeviceState> {
        Factory(storage, scope: .shared) { SystemDeviceState() }
    }

    /// The push tokens, one set for the process.
    public var pushTokensFactory: Factory<PushTokens> { Factory(storage, scope: .shared) { PushTokens() } }

    /// The outbox's wake-ups, one for the process: a message queued for later, an unlock.
    public var outboxEventsFactory: Factory<AccountEvents> { Factory(storage, scope: .shared) { AccountEvents() } }

    /// The logger.
    public var loggerFactory: Factory<Logger> { Factory(storage, scope: .shared) { [baseLogger] in baseLogger } }

    /// The registry of accounts, one for the process.
    public var keymakerRegistryFactory: Factory<KeymakerRegistry> {
        Factory(storage, scope: .shared) { [self] in
            KeymakerRegistry(dependencies: self) { [unowned self] account in
                UserContainer(account: account, global: self)
            }
        }
    }
}

extension GlobalContainer: HasPaths {}

extension GlobalContainer: HasDeviceIdentity {
    /// See ``deviceIdentityFactory``.
    public var deviceIdentity: DeviceIdentity { get throws { try deviceIdentityFactory() } }
}

extension GlobalContainer: HasKeychain {
    /// See ``keychainFactory``.
    public var keychain: any Keychain { get throws { try keychainFactory() } }
}

extension GlobalContainer: HasSecureElement {
    /// See ``secureElementFactory``.
    public var secureElement: (any SecureElement)? { get throws { try secureElementFactory() } }
}

extension GlobalContainer: HasClock {
    /// See ``clockFactory``.
    public var clock: any KeymakerClock { get throws { try clockFactory() } }
}

extension GlobalContainer: HasDeviceState {
    /// See ``deviceStateFactory``.
    public var deviceState: any DeviceState { get throws { try deviceStateFactory() } }
}

extension GlobalContainer: HasLogger {
    /// See ``loggerFactory``.
    public var logger: Logger { get throws { try loggerFactory() } }
}

extension GlobalContainer: HasPushTokens {
    /// See ``pushTokensFactory``.
    public var pushTokens: PushTokens { get throws { try pushTokensFactory() } }
}

extension GlobalContainer: HasOutboxEvents {
    /// See ``outboxEventsFactory``.
    public var outboxEvents: AccountEvents { get throws { try outboxEventsFactory() } }
}

extension GlobalContainer: HasKeymakerRegistry {
    /// See ``keymakerRegistryFactory``.
    public var keymakerRegistry: KeymakerRegistry { get throws { try keymakerRegistryFactory() } }
}
