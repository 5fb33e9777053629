import CofferBlocking
import CofferCrypto
import Logging
import ServiceLifecycle
import UnixSignals

/// The agent's long-running services (the socket server, the push stream, the outbox) in one `ServiceGroup`, run
/// with ``BlockingPool/taskExecutor`` as their tasks' preference: the push stream reads the keychain (its `flock`)
/// for each push and the outbox opens stores, so neither may run on the cooperative pool (docs/ARCHITECTURE.md,
/// "Concurrency"). The socket server moves each connection to its event loop itself.
public enum AgentServices {
    /// Runs `services` until they end or a signal in `gracefulShutdownSignals` shuts them down gracefully.
    public static func run(
        _ services: [any Service],
        gracefulShutdownSignals: [UnixSignal] = [],
        logger: Logger
    ) async throws {
        let group = ServiceGroup(services: services, gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
        try await withTaskExecutorPreference(BlockingPool.taskExecutor) { try await group.run() }
    }
}
