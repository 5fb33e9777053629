import Foundation

extension TestServers {
    /// A private Dovecot with its submission service (`dovecot.py start --submission`): IMAPS, SMTP submission over
    /// implicit TLS and over STARTTLS with AUTH against the same users, relaying through a private Postfix on
    /// 127.0.0.1 (`Tests/servers/postfix.py`) that delivers back into this Dovecot over LMTP. So a message sent to
    /// `bob@coffer.test` lands in bob's INBOX. Everything lives in a temporary folder that ``stop()`` removes.
    ///
    /// Postfix's master must start as root (as in CI); elsewhere ``start(maxSize:rejectSubject:owner:)`` throws with
    /// the harness's sentence.
    public struct SubmissionDovecot: Sendable {
        /// The name the certificates carry (connect to 127.0.0.1 with this as the server name).
        public static let name = "mail.coffer.test"
        /// The sender's account.
        public static let sender = (user: "alice", password: "alice-test-password", address: "alice@coffer.test")
        /// The recipient's account.
        public static let recipient = (user: "bob", password: "bob-test-password", address: "bob@coffer.test")

        /// The Dovecot folder (config, mail, `dovecot.log`; the relay in `relay/`, its log `relay/maillog`).
        public let dir: String
        /// The certificates, keys and pins (`ca.pem`, `a.pin`, `b.pin`, `backup.pin`, `rogue-chain.pem`...).
        public let certs: String
        /// The temporary folder that holds both.
        public let root: String
        /// The IMAPS port.
        public let imapsPort: Int
        /// The submission port where the server starts in plaintext and offers STARTTLS.
        public let submissionPort: Int
        /// The submissions port (implicit TLS, RFC 8314).
        public let submissionsPort: Int
        /// The Dovecot master process.
        public let pid: Int32

        /// Makes certificates and starts Dovecot with submission and its relay, on a thread of its own (``awaitWaiting(_:)``); the harness stops
        /// both once process `owner` (this one unless told) has ended.
        ///
        /// - Parameters:
        ///   - maxSize: Dovecot's `submission_max_mail_size` (0: no limit), advertised as SIZE.
        ///   - rejectSubject: The relay refuses at the end of DATA (550 5.7.1) a message whose Subject holds this.
        ///   - owner: The process whose end stops both servers.
        /// - Throws: ``TestSetupError`` with the harness's output when it cannot start (run scripts/setup.sh).
        public static func start(
            maxSize: Int = 0,
            rejectSubject: String? = nil,
            owner: Int32 = ProcessInfo.processInfo.processIdentifier
        ) async throws -> SubmissionDovecot {
            try await awaitWaiting {
                try startBlocking(maxSize: maxSize, rejectSubject: rejectSubject, owner: owner)
            }
        }

        static func startBlocking(maxSize: Int, rejectSubject: String?, owner: Int32) throws -> SubmissionDovecot {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                "coffer-submission-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            // Dovecot runs as nobody and must reach its folder below this one.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
            let certs = "\(root.path)/certs"
            try makeCertificates(in: certs, name: name)
            let dir = "\(root.path)/server"
            let result = try runCommand(
                [
                    "/usr/bin/env", "python3", Dovecot.harness, "start", "--dir", dir, "--cert", "\(certs)/a-chain.pem",
                    "--key", "\(certs)/a.key", "--user-pass", "\(sender.user):\(sender.password)", "--user-pass",
                    "\(recipient.user):\(recipient.password)", "--submission", "--submission-max-size", "\(maxSize)",
                    "--owner", "\(owner)",
                ] + (rejectSubject.map { ["--reject-subject", $0] } ?? [])
            )
            guard result.code == 0, let line = result.output.split(separator: "\n").last,
                let info = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let imaps = info["imaps_port"] as? Int, let submission = info["submission_port"] as? Int,
                let submissions = info["submissions_port"] as? Int, let pid = info["pid"] as? Int
            else {
                try? FileManager.default.removeItem(at: root)
                throw TestSetupError(
                    reason: "the test Dovecot with submission did not start (run scripts/setup.sh): \(result.output)"
                )
            }
            return SubmissionDovecot(
                dir: dir,
                certs: certs,
                root: root.path,
                imapsPort: imaps,
                submissionPort: submission,
                submissionsPort: submissions,
                pid: Int32(pid)
            )
        }

        /// Stops Postfix and Dovecot and removes the folder.
        public func stop() {
            _ = try? runCommand(["/usr/bin/env", "python3", Dovecot.harness, "stop", "--dir", dir])
            try? FileManager.default.removeItem(atPath: root)
        }

        /// The SPKI pin (base64) of the key `key` (`a`, `b`, `backup`, `rogue`...).
        public func pin(_ key: String) throws -> String {
            try String(contentsOfFile: "\(certs)/\(key).pin", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
        }

        /// Dovecot's log (submission-login logs each connection and whether it tried AUTH).
        public func log() -> String {
            (try? String(contentsOfFile: "\(dir)/dovecot.log", encoding: .utf8)) ?? ""
        }
    }
}
