import CofferNotify
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// A browser's cookie jar for the in-process client: only what the tests need.
struct Browser {
    var cookies: [String: String] = [:]

    var headers: HTTPFields {
        var fields: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if !cookies.isEmpty {
            fields[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        }
        return fields
    }

    /// Keeps the Set-Cookie values of a response (a `Max-Age=0` one removes the cookie).
    mutating func take(_ response: TestResponse) {
        for header in response.headers[values: .setCookie] {
            let pair = header.prefix { $0 != ";" }.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { continue }
            if header.contains("Max-Age=0") {
                cookies[String(pair[0])] = nil
            } else {
                cookies[String(pair[0])] = String(pair[1])
            }
        }
    }
}

/// The value of the page's first hidden `csrf` field.
func csrfField(_ body: String) -> String? {
    guard let range = body.range(of: #"name="csrf" value=""#) else { return nil }
    return String(body[range.upperBound...].prefix { $0 != "\"" })
}

extension TestClientProtocol {
    /// Revokes session `id` from the signed-in /account page, as its button does; the page answers 303.
    func revokeOnAccountPage(_ id: String, browser: Browser, csrf: String) async throws {
        try await execute(
            uri: "/account/revoke",
            method: .post,
            headers: browser.headers,
            body: ByteBuffer(string: "id=\(id)&csrf=\(csrf)")
        ) { #expect($0.status == .seeOther) }
    }

    /// Opens /account and signs in; returns the browser and the signed-in page's CSRF token.
    func signIn(user: String, password: String) async throws -> (Browser, String) {
        var browser = Browser()
        let csrf = try await execute(uri: "/account", method: .get) { response in
            browser.take(response)
            return try #require(csrfField(String(buffer: response.body)))
        }
        try await execute(
            uri: "/account/sign-in",
            method: .post,
            headers: browser.headers,
            body: ByteBuffer(string: "csrf=\(csrf)&user=\(user)&password=\(password)")
        ) { response in
            guard response.status == .seeOther else { throw TestFailure("sign-in answered \(response.status)") }
            browser.take(response)
        }
        let token = try await execute(uri: "/account", method: .get, headers: browser.headers) { response in
            try #require(csrfField(String(buffer: response.body)))
        }
        return (browser, token)
    }
}

@Suite struct AccountPageTests {
    @Test func theSignInPageHasAStrictPolicyAndAStrictCSRFCookie() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(uri: "/account", method: .get) { response in
                #expect(response.status == .ok)
                let policy = try #require(response.headers[.contentSecurityPolicy])
                for directive in [
                    "default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "style-src 'sha256-",
                ] {
                    #expect(policy.contains(directive))
                }
                #expect(!policy.contains("unsafe"))
                #expect(!policy.contains("script-src"))
                let cookie = try #require(response.headers[values: .setCookie].first)
                #expect(cookie.hasPrefix("coffer_csrf="))
                for attribute in ["; Secure", "; HttpOnly", "; SameSite=Strict", "; Path=/account"] {
                    #expect(cookie.contains(attribute))
                }
                let field = try #require(csrfField(String(buffer: response.body)))
                #expect(cookie.hasPrefix("coffer_csrf=\(field);"))
                #expect(field.count == 43)
            }
        }
    }

    /// (cookie, field): the CSRF cookie and form field sent with a right password; none of these may sign in.
    @Test(
        arguments: [
            (true, nil), (false, "FIELD"), (false, nil), (true, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            (true, ""),
        ] as [(Bool, String?)]
    )
    func signInWithoutTheRightCSRFTokenIs403(sendCookie: Bool, field: String?) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var browser = Browser()
            let csrf = try await client.execute(uri: "/account", method: .get) { response in
                browser.take(response)
                return try #require(csrfField(String(buffer: response.body)))
            }
            if !sendCookie { browser.cookies = [:] }
            var body = "user=alice&password=alice-pw"
            if let field { body += "&csrf=" + (field == "FIELD" ? csrf : field) }
            try await client.execute(
                uri: "/account/sign-in",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: body)
            ) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[values: .setCookie].allSatisfy { !$0.hasPrefix("coffer_account=") })
            }
        }
    }

    @Test func aWrongPasswordIs401AndTheRightOneSetsAStrictSessionCookie() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var browser = Browser()
            let csrf = try await client.execute(uri: "/account", method: .get) { response in
                browser.take(response)
                return try #require(csrfField(String(buffer: response.body)))
            }
            try await client.execute(
                uri: "/account/sign-in",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=\(csrf)&user=alice&password=bob-pw")
            ) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[values: .setCookie].allSatisfy { !$0.hasPrefix("coffer_account=") })
                #expect(!String(buffer: response.body).contains("bob-pw"))
            }
            try await client.execute(
                uri: "/account/sign-in",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=\(csrf)&user=alice&password=alice-pw")
            ) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/account")
                let cookie = try #require(
                    response.headers[values: .setCookie].first { $0.hasPrefix("coffer_account=") }
                )
                for attribute in ["; Secure", "; HttpOnly", "; SameSite=Strict"] { #expect(cookie.contains(attribute)) }
            }
        }
    }

    @Test func theListShowsOnlyTheUsersSessionsAndAHostileNameAsText() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let hostile = #"<script>alert(1)</script><img src=x onerror="alert(2)">"#
            _ = try await client.register(Device().registration(user: "alice", password: "alice-pw", name: hostile))
            let bobs = try await client.register(
                Device().registration(user: "bob", password: "bob-pw", name: "bobphone")
            )
            let (browser, _) = try await client.signIn(user: "alice", password: "alice-pw")
            try await client.execute(uri: "/account", method: .get, headers: browser.headers) { response in
                #expect(response.status == .ok)
                let body = String(buffer: response.body)
                #expect(
                    body.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;")
                )
                #expect(!body.contains("<script"))
                #expect(!body.contains("<img"))
                #expect(!body.contains("bobphone"))
                #expect(!body.contains(bobs.sessionID))
                #expect(response.headers[.cacheControl] == "no-store")
            }
        }
    }

    @Test func revokeNeedsTheCSRFTokenAndTheUsersOwnSession() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let bobs = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            let (browser, csrf) = try await client.signIn(user: "alice", password: "alice-pw")
            let cases: [(String, HTTPResponse.Status)] = [
                ("id=\(phone.sessionID)", .forbidden),
                ("id=\(phone.sessionID)&csrf=", .forbidden),
                ("id=\(phone.sessionID)&csrf=\(String(csrf.reversed()))", .forbidden),
                ("id=\(bobs.sessionID)&csrf=\(csrf)", .notFound),
                ("id=no-such-session&csrf=\(csrf)", .notFound),
            ]
            for (body, status) in cases {
                try await client.execute(
                    uri: "/account/revoke",
                    method: .post,
                    headers: browser.headers,
                    body: ByteBuffer(string: body)
                ) { response in #expect(response.status == status, "\(body)") }
            }
            #expect(try await harness.storage.session(id: phone.sessionID)?.revoked == false)
            #expect(try await harness.storage.session(id: bobs.sessionID)?.revoked == false)
            // The CSRF token of the sign-in form is not the signed-in one.
            try await client.execute(
                uri: "/account/revoke",
                method: .post,
                headers: Browser().headers,
                body: ByteBuffer(string: "id=\(phone.sessionID)&csrf=\(csrf)")
            ) { response in #expect(response.status == .unauthorized) }
            try await client.execute(
                uri: "/account/revoke",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "id=\(phone.sessionID)&csrf=\(csrf)")
            ) { response in #expect(response.status == .seeOther) }
            #expect(try await harness.storage.session(id: phone.sessionID)?.revoked == true)
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(phone.token)) { response in
                #expect(response.status == .unauthorized)
            }
            try await client.execute(uri: "/account", method: .get, headers: browser.headers) { response in
                #expect(String(buffer: response.body).contains("revoked"))
            }
        }
    }

    /// A revocation from the /account page wakes that session's open long poll, which answers 401, as the API's
    /// `DELETE /v1/sessions/{id}` does: both go through `NotifyService.revokeSession(id:)`. The revocation is made
    /// while the poll waits (it is counted as a waiter), so only the wake (the session's signal generation moves on)
    /// ends it before its 30 s.
    @Test(arguments: ["account page", "API"])
    func revokingWakesTheSessionsLongPoll(from path: String) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let laptop = try await client.register(
                Device().registration(user: "alice", password: "alice-pw", name: "laptop")
            )
            let (browser, csrf) = try await client.signIn(user: "alice", password: "alice-pw")
            async let polled = client.execute(
                uri: "/v1/stream?wait=\(NotifyAPI.maximumWait)",
                method: .get,
                headers: bearer(phone.token)
            ) { $0.status }
            try #require(try await harness.waitForStreamWaiters(1) == 1)
            let before = await harness.service.signal.generation(sessionID: phone.sessionID)
            if path == "API" {
                try await client.execute(
                    uri: "/v1/sessions/\(phone.sessionID)",
                    method: .delete,
                    headers: bearer(laptop.token)
                ) { #expect($0.status == .noContent) }
            } else {
                try await client.revokeOnAccountPage(phone.sessionID, browser: browser, csrf: csrf)
            }
            #expect(await harness.service.signal.generation(sessionID: phone.sessionID) == before + 1)
            #expect(try await polled == .unauthorized)
            #expect(try await harness.storage.session(id: phone.sessionID)?.revoked == true)
            #expect(try await harness.storage.session(id: laptop.sessionID)?.revoked == false)
        }
    }

    @Test func signInIsRateLimitedBeforeTheMailServerIsAsked() async throws {
        let harness = try Harness(registrationsPerMinute: 3)
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var browser = Browser()
            let csrf = try await client.execute(uri: "/account", method: .get) { response in
                browser.take(response)
                return try #require(csrfField(String(buffer: response.body)))
            }
            var statuses: [HTTPResponse.Status] = []
            for password in ["a", "b", "c", "alice-pw"] {
                try await client.execute(
                    uri: "/account/sign-in",
                    method: .post,
                    headers: browser.headers,
                    body: ByteBuffer(string: "csrf=\(csrf)&user=alice&password=\(password)")
                ) { response in statuses.append(response.status) }
            }
            #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests])
        }
    }

    @Test func signOutEndsTheBrowserSession() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var (browser, csrf) = try await client.signIn(user: "alice", password: "alice-pw")
            let signedIn = browser
            try await client.execute(
                uri: "/account/sign-out",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=\(csrf)")
            ) { response in
                #expect(response.status == .seeOther)
                browser.take(response)
            }
            #expect(browser.cookies["coffer_account"] == nil)
            try await client.execute(uri: "/account", method: .get, headers: signedIn.headers) { response in
                #expect(String(buffer: response.body).contains("/account/sign-in"))
            }
        }
    }
}
