// swift-tools-version:6.1
import PackageDescription

/// The lock every target uses: a pthread mutex, which ThreadSanitizer sees (see docs/ARCHITECTURE.md, "Locks").
let locks: Target.Dependency = .product(name: "NIOConcurrencyHelpers", package: "swift-nio")
/// Generic types named in a command's code (ArgumentParser's property wrappers, the synthesized `Codable` of the agent
/// protocol's enums) are instantiated through metadata accessors, not from mangled names: a mangled name checks its
/// generic requirements at run time, and each check the runtime has not cached scans every protocol conformance record
/// of the binary (10,680 in `coffer`): 22 % of a `coffer list`'s samples before, 11 % after (those left are in
/// ArgumentParser's own code). CONTRIBUTING, "Whole commands".
let startupSettings: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"])
]

let package = Package(
    name: "Coffer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CofferCrypto", targets: ["CofferCrypto"]),
        .library(name: "CofferKeychain", targets: ["CofferKeychain"]),
        .library(name: "CofferKeymaker", targets: ["CofferKeymaker"]),
        .library(name: "CofferHTML", targets: ["CofferHTML"]),
        .library(name: "CofferMIME", targets: ["CofferMIME"]),
        .library(name: "CofferContent", targets: ["CofferContent"]),
        .library(name: "CofferStore", targets: ["CofferStore"]),
        .library(name: "CofferAttachments", targets: ["CofferAttachments"]),
        .library(name: "CofferCompose", targets: ["CofferCompose"]),
        .library(name: "CofferModel", targets: ["CofferModel"]),
        .library(name: "CofferAgentProtocol", targets: ["CofferAgentProtocol"]),
        .library(name: "CofferApp", targets: ["CofferApp"]),
        .library(name: "CofferAgent", targets: ["CofferAgent"]),
        .library(name: "CofferTransport", targets: ["CofferTransport"]),
        .library(name: "CofferIMAP", targets: ["CofferIMAP"]),
        .library(name: "CofferSMTP", targets: ["CofferSMTP"]),
        .library(name: "CofferPush", targets: ["CofferPush"]),
        .library(name: "CofferTPM", targets: ["CofferTPM"]),
        .library(name: "CofferOpenPGP", targets: ["CofferOpenPGP"]),
        .library(name: "CofferSync", targets: ["CofferSync"]),
        .library(name: "CofferOutbox", targets: ["CofferOutbox"]),
        .library(name: "CofferNotify", targets: ["CofferNotify"]),
        .library(name: "CofferNotifyClient", targets: ["CofferNotifyClient"]),
        .executable(name: "coffer", targets: ["coffer"]),
        .executable(name: "coffer-core", targets: ["coffer-core"]),
        .executable(name: "coffer-bench", targets: ["coffer-bench"]),
        .executable(name: "coffer-notify", targets: ["coffer-notify"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        // Two Linux calls Swift cannot import directly (prctl is variadic; <malloc.h> is not in Glibc's module map).
        .target(name: "CCofferSystem"),
        .target(
            name: "CofferCrypto",
            dependencies: [
                locks,
                "CCofferSystem", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // BlockingPool: the one NIOThreadPool blocking work runs on (ARCHITECTURE.md, "Concurrency"), and the child
        // processes started from it. Apart from CofferCrypto, so that a client of the agent links no NIO.
        .target(name: "CofferBlocking", dependencies: [locks, .product(name: "NIOPosix", package: "swift-nio")]),
        .target(name: "CofferKeychain", dependencies: [locks, "CofferCrypto"]),
        .target(name: "CofferKeymaker", dependencies: ["CofferBlocking", locks, "CofferCrypto", "CofferKeychain"]),
        .target(
            name: "CofferTesting",
            dependencies: [locks, "CofferBlocking", "CofferCrypto", "CofferKeychain", "CofferKeymaker"]
        ),
        // Pure Swift, no dependencies: the WHATWG HTML5 parser and serializer.
        .target(name: "CofferHTML"),
        // Pure Swift, Foundation and the lock only: RFC 5322 / MIME parsing, mbox and Maildir readers.
        .target(name: "CofferMIME", dependencies: [locks], swiftSettings: startupSettings),
        // The values the agent protocol carries that the store, sync, push and outbox make (message summaries and
        // details, sync and outbox reports, a push, a notification server): no store, network or cryptography, so
        // that a client of the agent links none of them. Each module that made one of them re-exports this one.
        .target(name: "CofferModel", dependencies: ["CofferMIME"], swiftSettings: startupSettings),
        // Sanitizer, CSS filter, Content Security Policy and remote-content policy over CofferHTML's tree.
        .target(name: "CofferContent", dependencies: ["CofferHTML"]),
        // The GRDB mail store with sealed columns and a blind search index.
        .target(
            name: "CofferStore",
            dependencies: [
                "CofferBlocking",
                "CofferCrypto", "CofferKeymaker", "CofferMIME", "CofferModel", "CofferTransport", "CofferOpenPGP",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Generated sample mail (SyntheticMail, SplitMix) for the tour, coffer-bench and tests; not store code.
        .target(name: "CofferSampleMail"),
        // The encrypted attachment cache: streaming AEAD files with expiry, and previews.
        .target(name: "CofferAttachments", dependencies: ["CofferBlocking", locks, "CofferCrypto", "CofferKeymaker"]),
        // Writing mail: the editor's template (headers and a plain-text body), replies and forwards built from a
        // received message, and the editor session on a cleartext file in a private runtime folder.
        .target(
            name: "CofferCompose",
            dependencies: ["CofferBlocking", "CofferMIME", "CofferContent", "CofferCrypto", "CofferAttachments"]
        ),
        // The agent's wire protocol: frames, the typed requests, replies and events, the account-name rule, and the
        // client (a blocking socket: a command does one thing at a time). No NIO, no containers, no server.
        .target(
            name: "CofferAgentProtocol",
            dependencies: [
                locks,
                "CofferCrypto", "CofferMIME", "CofferModel",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: startupSettings
        ),
        // Dependency injection (Has-protocols, containers, Factory), the account registry and the application
        // services every mode shares: the per-account coordinator, sync, push sessions, page assembly.
        .target(
            name: "CofferApp",
            dependencies: [
                "CofferBlocking",
                locks,
                "CofferAgentProtocol", "CofferCrypto", "CofferKeychain", "CofferKeymaker", "CofferStore",
                "CofferAttachments", "CofferSync", "CofferNotifyClient", "CofferContent", "CofferKeymakerTPM",
                "CofferCompose", "CofferOutbox", "CofferOpenPGP",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The agent: the dispatcher and handlers every request goes through (in the agent, or in a command's own
        // process), and the service (a NIO Unix socket server) with its push stream.
        .target(
            name: "CofferAgent",
            dependencies: [
                "CofferBlocking",
                locks,
                "CofferAgentProtocol", "CofferApp", "CofferCrypto", "CofferKeychain", "CofferKeymaker", "CofferStore",
                "CofferAttachments", "CofferSync", "CofferNotifyClient", "CofferPush", "CofferContent",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Pinned TLS client channels (NIO + NIOSSL): chain and hostname validation, then the SPKI pin check.
        .target(
            name: "CofferTransport",
            dependencies: [
                locks,
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The IMAP protocol layer: an incremental response parser, the command encoder and an async client.
        .target(
            name: "CofferIMAP",
            dependencies: [
                locks,
                "CofferTransport", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // SMTP submission (RFC 6409) over pinned TLS: the reply parser, the command and DATA encoders, an async client.
        .target(
            name: "CofferSMTP",
            dependencies: [
                locks,
                "CofferTransport", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The outbox's sender: due messages over SMTP submission, then their copies in the Sent folder.
        .target(
            name: "CofferOutbox",
            dependencies: [
                "CofferBlocking",
                locks,
                "CofferCrypto", "CofferIMAP", "CofferMIME", "CofferModel", "CofferSMTP", "CofferStore", "CofferSync",
                "CofferTransport",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // IMAP accounts and sync into the sealed store (incremental by UID, UIDVALIDITY, expunges, flags both ways).
        .target(
            name: "CofferSync",
            dependencies: [
                "CofferBlocking",
                "CofferCrypto", "CofferIMAP", "CofferModel", "CofferStore", "CofferTransport",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // RFC 8188 aes128gcm content coding, RFC 8291 Web Push message encryption and RFC 8292 VAPID, shared by
        // coffer-notify (the sender) and the client's push handler (the receiver).
        .target(name: "CofferPush", dependencies: ["CofferModel", .product(name: "Crypto", package: "swift-crypto")]),
        // tpm2-tss (Debian's libtss2-dev): ESAPI, the TCTI loader, response-code decoding and TPM2B marshaling.
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        // A TPM 2.0 through tpm2-tss: a storage key, secrets sealed under a PIN-derived auth value with the TPM's
        // dictionary-attack lockout, and NV counters.
        .target(
            name: "CofferTPM",
            dependencies: [locks, "CTSS2", "CofferCrypto", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // RNP (Debian's librnp-dev, the OpenPGP library Thunderbird uses): its C FFI.
        .systemLibrary(name: "CRNP", pkgConfig: "librnp", providers: [.apt(["librnp-dev"])]),
        // OpenPGP through RNP: keys generated and imported in memory only, encryption, decryption with verification,
        // detached signatures. No RNP keyring file is ever read or written.
        .target(name: "CofferOpenPGP", dependencies: ["CofferBlocking", locks, "CRNP", "CofferCrypto"]),
        // The Keymaker's TPM: TPMPINBinder and TPMKeySealer, injected by the composition root (CofferApp, the CLI),
        // so that the Keymaker and everything above it but the app build without libtss2.
        .target(name: "CofferKeymakerTPM", dependencies: ["CofferCrypto", "CofferKeymaker", "CofferTPM"]),
        // coffer-notify's service: sessions on GRDB, the Hummingbird HTTP API, Dovecot events in, encrypted pushes out.
        .target(
            name: "CofferNotify",
            dependencies: [
                "CofferBlocking",
                "CofferCrypto", "CofferPush", "CofferIMAP", "CofferTransport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            ]
        ),
        // The device's side of push: the session's keys in the keychain, the service's API over pinned TLS, the push
        // handler that opens a push without the MainKey.
        .target(
            name: "CofferNotifyClient",
            dependencies: [
                "CofferBlocking",
                "CofferCrypto", "CofferKeychain", "CofferKeymaker", "CofferModel", "CofferPush", "CofferStore",
                "CofferSync", "CofferTransport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "coffer-notify",
            dependencies: [
                "CofferNotify", "CofferIMAP", "CofferPush", "CofferTransport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The commands both programs answer (list, search, show) as plain values: their requests, their output, and
        // the small `coffer`'s reading of their usual command lines. No ArgumentParser.
        .target(
            name: "CofferReading",
            dependencies: ["CofferAgentProtocol", "CofferMIME"],
            swiftSettings: startupSettings
        ),
        // Those commands' options as ArgumentParser parses them in `coffer-core`, over any caller of the agent protocol.
        .target(
            name: "CofferCommandLine",
            dependencies: [
                "CofferAgentProtocol", "CofferReading",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: startupSettings
        ),
        // `coffer`: answers list, search and show through a running agent, and becomes `coffer-core` for the rest.
        .executableTarget(
            name: "coffer",
            dependencies: ["CofferAgentProtocol", "CofferReading", "CofferCrypto"],
            swiftSettings: startupSettings
        ),
        // Every command: the agent, one-shot commands in process, the tour.
        .executableTarget(
            name: "coffer-core",
            dependencies: [
                "CofferBlocking",
                "CofferCommandLine",
                "CofferReading",
                locks,
                "CofferCrypto", "CofferKeychain", "CofferKeymaker", "CofferStore", "CofferAttachments", "CofferMIME",
                "CofferAgentProtocol", "CofferApp", "CofferAgent", "CofferSampleMail", "CofferCompose", "CofferOutbox",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "CofferContent", "CofferTransport", "CofferIMAP", "CofferSync", "CofferNotifyClient", "CofferPush",
                "CofferKeymakerTPM", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: startupSettings
        ),
        .executableTarget(
            name: "coffer-bench",
            dependencies: [
                "CofferCrypto", "CofferKeychain", "CofferKeymaker", "CofferStore", "CofferTesting",
                "CofferAgentProtocol",
                "CofferApp", "CofferAgent", "CofferContent", "CofferHTML", "CofferMIME", "CofferSampleMail",
                "CofferNotify", "CofferPush", "CofferOpenPGP",
                "CofferKeymakerTPM", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "CofferCryptoTests",
            dependencies: [locks, "CofferCrypto", "CofferTesting"],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "CofferKeychainTests", dependencies: [locks, "CofferKeychain", "CofferTesting"]),
        .testTarget(
            name: "CofferKeymakerTests",
            dependencies: [
                "CofferBlocking",
                locks,
                "CofferKeymaker", "CofferTesting", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "CofferHTMLTests",
            dependencies: ["CofferHTML", "CofferSampleMail"],
            exclude: ["generate_entities.py"]
        ),
        .testTarget(
            name: "CofferMIMETests",
            dependencies: ["CofferMIME", "CofferSampleMail"],
            exclude: ["make_corpus.py", "oracle.py", "compose_oracle.py"]
        ),
        .testTarget(
            name: "CofferComposeTests",
            dependencies: ["CofferCompose", "CofferMIME", "CofferContent", "CofferAttachments", "CofferSampleMail"]
        ),
        .testTarget(name: "CofferContentTests", dependencies: ["CofferContent", "CofferHTML", "CofferSampleMail"]),
        .testTarget(
            name: "CofferStoreTests",
            dependencies: [
                "CofferBlocking", "CofferStore", "CofferAttachments", "CofferTesting", "CofferSampleMail",
                "CofferOpenPGP",
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "CofferCLITests",
            dependencies: [
                locks, "CofferTesting", "CofferAgentProtocol", "CofferApp", "CofferSampleMail", "CofferCommandLine",
                "CofferReading",
            ],
            exclude: ["pty_driver.py"]
        ),
        .testTarget(
            name: "CofferTransportTests",
            dependencies: [
                locks,
                "CofferTransport", "CofferTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "CofferIMAPTests",
            dependencies: [
                locks,
                "CofferIMAP", "CofferTransport", "CofferTesting", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "CofferOutboxTests",
            dependencies: [
                "CofferOutbox", "CofferSMTP", "CofferIMAP", "CofferStore", "CofferMIME", "CofferTransport",
                "CofferKeymaker", "CofferCrypto", "CofferTesting", "CofferSampleMail",
            ]
        ),
        .testTarget(
            name: "CofferSMTPTests",
            dependencies: [
                locks,
                "CofferSMTP", "CofferIMAP", "CofferTransport", "CofferTesting",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "CofferAppTests",
            dependencies: [
                "CofferBlocking",
                locks,
                "CofferAgentProtocol", "CofferApp", "CofferAgent", "CofferTesting", "CofferKeymaker", "CofferKeychain",
                "CofferStore", "CofferAttachments", "CofferSync", "CofferSampleMail",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "CofferPushTests", dependencies: ["CofferPush"], exclude: ["oracle.py"]),
        .testTarget(
            name: "CofferTPMTests",
            dependencies: [
                locks, "CofferTPM", "CofferKeymaker", "CofferKeymakerTPM", "CofferKeychain", "CofferTesting",
            ]
        ),
        .testTarget(
            name: "CofferOpenPGPTests",
            dependencies: ["CofferOpenPGP", "CofferCrypto", "CofferTesting", "CRNP"]
        ),
        .testTarget(
            name: "CofferSyncTests",
            dependencies: [
                locks,
                "CofferSync", "CofferIMAP", "CofferStore", "CofferTransport", "CofferTesting", "CofferKeymaker",
                "CofferKeychain", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "CofferNotifyTests",
            dependencies: [
                "CofferNotify", "CofferPush", "CofferTesting", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            ],
            exclude: ["push_receiver.py"]
        ),
        .testTarget(
            name: "CofferNotifyClientTests",
            dependencies: [
                "CofferNotifyClient", "CofferNotify", "CofferPush", "CofferKeychain", "CofferCrypto", "CofferTesting",
                "CofferIMAP", "CofferTransport", "CofferKeymaker", "CofferAgentProtocol", "CofferApp", "CofferAgent",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
