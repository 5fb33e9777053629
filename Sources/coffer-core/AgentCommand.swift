import ArgumentParser
import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferCommandLine
import CofferCrypto
import CofferReading
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// `coffer agent`: the app process, as ssh-agent and gpg-agent are.
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run the agent: it holds unlocked keys with a live autolock and serves the other commands.",
        discussion: """
            The agent runs in the foreground and logs to standard error (never PINs, keys or message text). While it \
            runs, every command for this home goes to it over a Unix socket in $XDG_RUNTIME_DIR/coffer (folder 0700, \
            socket 0600, peer uid checked): `coffer unlock` once, then list, show, search... until the autolock \
            fires or `coffer lock`. SIGTERM or SIGINT stops it and zeroes every key; SIGUSR1 (or `coffer \
            background`) means "the app went to the background".
            """
    )

    @Option(name: .long, help: "Folder for all of Coffer's data (default: $COFFER_HOME, else the XDG folders).")
    var home: String?

    @Flag(name: .long, help: "Write a systemd user unit (~/.config/systemd/user/coffer-agent.service) and exit.")
    var installUserService = false

    @Option(
        name: .long,
        help: "Seconds an unlock or protect request may wait for presence (default 120; 1 to 3600)."
    )
    var unlockTimeout: Int?

    func validate() throws {
        if let unlockTimeout, !(1...3600).contains(unlockTimeout) {
            throw ValidationError("--unlock-timeout must be between 1 and 3600 seconds.")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let paths = try AppPaths.forHome(home)
            if installUserService {
                try installUnit()
                return
            }
            FreedMemory.restartWithoutThreadCache()
            let socket = paths.agentSocket
            if let running = try AgentClient.connect(socketPath: socket) {
                running.close()
                throw CLIError("An agent already runs for this home (socket \(socket)).")
            }
            LoggingSystem.bootstrap(StreamLogHandler.standardError)
            var logger = Logger(label: "coffer.agent")
            logger.logLevel = .info
            SecretBytes.logger = logger
            let global = GlobalContainer(paths: paths, logger: logger)
            var limits = AgentLimits()
            if let unlockTimeout { limits.unlockMilliseconds = Int64(unlockTimeout) * 1000 }
            let server = AgentServer(dependencies: global, socketPath: socket, limits: limits)
            try await AgentServices.run(
                [server, PushStreamHolder(global: global), OutboxService(global: global)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        }
    }

    private func installUnit() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let userHome = environment["HOME"], !userHome.isEmpty else {
            throw CLIError("$HOME is not set, so there is no place for a systemd user unit.")
        }
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(userHome)/.config"
        let folder = "\(config)/systemd/user"
        let unit = "\(folder)/coffer-agent.service"
        let binary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "coffer"
        var start = "\(binary) agent"
        let chosenHome = home ?? environment["COFFER_HOME"].flatMap { $0.isEmpty ? nil : $0 }
        if let chosenHome { start += " --home \(absolutePath(chosenHome))" }
        let text = """
            [Unit]
            Description=Coffer agent: holds unlocked mail keys with autolock, serves the coffer CLI
            Documentation=man:ssh-agent(1)

            [Service]
            Type=simple
            ExecStart=\(start)
            Restart=on-failure
            # The agent holds keys: no core dumps, no new privileges. (No PrivateTmp: the agent opens the files
            # clients name, such as `coffer import /tmp/mail.mbox`, and must see the same /tmp.)
            LimitCORE=0
            NoNewPrivileges=yes
            LockPersonality=yes
            RestrictSUIDSGID=yes

            [Install]
            WantedBy=default.target

            """
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: unit, contents: Data(text.utf8)) else {
            throw CLIError("Could not write \(unit).")
        }
        print("Wrote \(unit).")
        print("Enable and start it with:")
        print("  systemctl --user daemon-reload")
        print("  systemctl --user enable --now coffer-agent.service")
        print("Then `coffer unlock` once; `coffer status` shows the agent and the autolock.")
    }
}

/// `coffer background`: the app went to the background.
struct BackgroundCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "background",
        abstract: "Tell the agent the app went to the background (accounts with `autolock background` lock now)."
    )

    @OptionGroup var home: HomeOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                guard path.isAgent else {
                    throw CLIError("No agent runs for this home, so no process holds a key to lock.")
                }
                try await path.call(.background)
            }
            print("The agent applied every account's background policy.")
        }
    }
}
