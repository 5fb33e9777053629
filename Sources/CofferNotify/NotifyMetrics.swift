import Foundation
import Hummingbird
import Metrics
import Prometheus

/// coffer-notify's metrics (swift-metrics on a Prometheus registry of its own): requests by route pattern, method
/// and status; pushes queued and failed; Web Push posts by result; live sessions; long polls waiting. No label ever
/// holds a user name, device name, session id, URL or token: routes are the patterns (`/v1/sessions/{id}`), and an
/// unmatched path is `unmatched`.
public struct NotifyMetrics: Sendable {
    /// The registry the `/metrics` listener emits.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    let streamWaiters: Metrics.Meter
    let activeSessions: Metrics.Gauge

    /// Creates the metrics on a fresh registry.
    public init() {
        registry = PrometheusCollectorRegistry()
        factory = PrometheusMetricsFactory(registry: registry)
        streamWaiters = Metrics.Meter(label: "notify_stream_waiters", factory: factory)
        activeSessions = Metrics.Gauge(label: "notify_active_sessions", factory: factory)
        // Made at start so that a scrape shows every series at 0 before the first event.
        for result in ["queued", "failed"] { push(result, count: 0) }
        for result in ["delivered", "refused", "failed"] {
            Metrics.Counter(label: "notify_web_push_total", dimensions: [("result", result)], factory: factory)
                .increment(by: 0)
        }
    }

    /// Counts one answered request.
    func request(route: String, method: HTTPRequest.Method, status: HTTPResponse.Status) {
        Metrics.Counter(
            label: "notify_requests_total",
            dimensions: [("route", route), ("method", method.rawValue), ("status", String(status.code))],
            factory: factory
        ).increment()
    }

    /// Counts a push sealed and queued (`queued`) or not sealed (`failed`).
    func push(_ result: String, count: Int = 1) {
        Metrics.Counter(label: "notify_pushes_total", dimensions: [("result", result)], factory: factory)
            .increment(by: Int64(count))
    }

    /// Counts a Web Push outcome: `delivered` (2xx), `retry` (429, 5xx or no answer; tried again), `gone` (404 or
    /// 410), `refused` (another status, or the URL rules) or `failed` (every attempt used).
    func webPush(_ result: String) {
        Metrics.Counter(label: "notify_web_push_total", dimensions: [("result", result)], factory: factory).increment()
    }

    /// The Prometheus text, with the live-session gauge read from the storage first.
    public func exposition(storage: any NotifyStorage, now: Date) async -> [UInt8] {
        if let live = try? await storage.liveSessionCount(now: now) { activeSessions.record(live) }
        return registry.emitToBuffer()
    }
}

/// Counts every request of the API router in ``NotifyMetrics``.
struct NotifyMetricsMiddleware: RouterMiddleware {
    typealias Context = NotifyRequestContext
    let metrics: NotifyMetrics

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method, status: response.status)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method, status: status)
            throw error
        }
    }
}

extension NotifyAPI {
    /// The router of the separate metrics listener: `GET /metrics` in the Prometheus text format.
    public static func metricsRouter(service: NotifyService) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            let bytes = await service.metrics.exposition(storage: service.storage, now: service.now())
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes))
            )
        }
        return router
    }
}
