import CofferAgentProtocol
import CofferApp
import CofferNotifyClient
import CofferOutbox
import CofferStore
import Foundation
import Logging
import ServiceLifecycle

/// The agent's outbox: sends each queued message when it is due (the end of its `--delay`, a retry's backoff) and
/// what was queued while the account was locked at its next unlock, through the account's coordinator as
/// background work (``AccountCoordinator/Job/send(server:)``), which never restarts the autolock.
///
/// One loop waits for the earliest due time of the accounts this agent has opened, or for an event
/// (``GlobalContainer/outboxEvents``: a message queued for later, an unlock), whichever comes first; it polls
/// nothing. An account found locked is left alone until its next event (the unlock).
public final class OutboxService: Service, Sendable {
    private let global: GlobalContainer

    /// The outbox of the agent's accounts.
    public init(global: GlobalContainer) { self.global = global }

    private var logger: Logger { (try? global.logger) ?? Logger(label: "coffer.outbox") }

    /// Runs until graceful shutdown.
    public func run() async throws {
        let events = try global.outboxEvents
        await cancelWhenGracefulShutdown {
            // Accounts left alone until their next event: locked, or with a message due that a drain did not take.
            var waiting: Set<String> = []
            while !Task.isCancelled {
                var earliest: Date?
                for user in (try? self.global.keymakerRegistry.openUsers) ?? [] where !waiting.contains(user.account) {
                    guard var next = await self.nextAttempt(user) else { continue }
                    if next <= Date() {
                        let drained = await self.drain(user)
                        // A retry is due later; a message still due now (or a locked account) waits for an event.
                        guard drained == .done, let after = await self.nextAttempt(user) else {
                            if drained == .locked { waiting.insert(user.account) }
                            continue
                        }
                        if after <= Date() {
                            waiting.insert(user.account)
                            continue
                        }
                        next = after
                    }
                    earliest = min(earliest ?? next, next)
                }
                let woken = await Self.wait(for: events, until: earliest)
                waiting.subtract(woken)
            }
        }
    }

    /// The accounts named by the next events, or none when `deadline` came first (or the task was cancelled).
    private static func wait(for events: AccountEvents, until deadline: Date?) async -> Set<String> {
        await withTaskGroup(of: Set<String>?.self) { group in
            group.addTask { await events.next() }
            if let deadline {
                group.addTask {
                    try? await Task.sleep(for: .seconds(max(0, deadline.timeIntervalSinceNow)))
                    return nil
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? []
        }
    }

    /// When the account's next queued message is due, or nil when nothing is queued or the account is locked (its
    /// store is not opened again after a lock dropped it: the unlock's event brings the account back).
    private func nextAttempt(_ user: UserContainer) async -> Date? {
        guard let keymaker = try? user.keymaker, await !keymaker.isLocked, let store = try? user.mailStore else {
            return nil
        }
        return try? await store.nextOutboxAttempt()
    }

    private enum Drained { case done, locked }

    /// Sends the due messages of each server account of `user`.
    private func drain(_ user: UserContainer) async -> Drained {
        do {
            let store = try user.mailStore
            for (id, _) in try await store.serverAccounts() {
                let report = try await user.coordinator.send(server: id)
                // Nobody may be at the terminal: a message that was not sent says so on the desktop, if there is one.
                for failure in report.failed {
                    _ = await PushHandler.desktopNotification(
                        title: "Not sent: \(failure.subject.isEmpty ? "(no subject)" : failure.subject)",
                        body: failure.reason
                    )
                }
                if report.sent > 0 || !report.failed.isEmpty || report.retrying > 0 {
                    logger.info(
                        "outbox",
                        metadata: [
                            "account": "\(user.account)", "sent": "\(report.sent)",
                            "failed": "\(report.failed.count)", "retrying": "\(report.retrying)",
                        ]
                    )
                }
            }
            return .done
        } catch {
            if AppError.isLocked(error) { return .locked }
            // Anything else (the store cannot be read) waits for the next event rather than spinning.
            logger.notice("outbox: \(error)", metadata: ["account": "\(user.account)"])
            return .locked
        }
    }
}
