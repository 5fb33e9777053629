import CofferPush
import Foundation
import Hummingbird

extension NotifyAPI {
    /// The FastSync routes, behind the bearer check: `GET /v1/fastsync/key` (the user's escrow public key),
    /// `PUT /v1/fastsync/kek` (escrow a sealed KEK for this session), `GET /v1/fastsync/kek` (its expiry),
    /// `DELETE /v1/fastsync/kek` (turn FastSync off). 404 on all of them when the service has no escrow.
    static func addFastSyncRoutes(
        to protected: RouterGroup<NotifyRequestContext>,
        service: NotifyService
    ) {
        @Sendable func escrow() throws -> FastSyncEscrow {
            guard let escrow = service.escrow else { throw HTTPError(.notFound, message: "FastSync is not enabled.") }
            return escrow
        }
        protected.get("/fastsync/key") { _, context -> FastSyncKeyResponse in
            let session = try context.requireSession()
            let key = try await escrow().publicKey(user: session.user)
            return FastSyncKeyResponse(
                publicKey: Base64URL.encode(key),
                suite: "DHKEM(X25519,HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305"
            )
        }
        protected.put("/fastsync/kek") { request, context -> HTTPResponse.Status in
            let session = try context.requireSession()
            let upload = try await request.decode(as: FastSyncEscrowFormat.Upload.self, context: context)
            try await escrow().put(upload, for: session, now: service.now())
            service.logger.info("fastsync key escrowed", metadata: ["session": "\(session.id)"])
            return .noContent
        }
        protected.get("/fastsync/kek") { _, context -> FastSyncStatusResponse in
            let session = try context.requireSession()
            return FastSyncStatusResponse(
                expires: try await escrow().kekExpiry(sessionID: session.id, now: service.now())
            )
        }
        protected.delete("/fastsync/kek") { _, context -> HTTPResponse.Status in
            let session = try context.requireSession()
            try await escrow().delete(sessionID: session.id)
            // The pushes that carry the key go with it.
            _ = try await service.storage.deleteKeyPushes(sessionID: session.id)
            service.logger.info("fastsync key deleted", metadata: ["session": "\(session.id)"])
            return .noContent
        }
    }
}
