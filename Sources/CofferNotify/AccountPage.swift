import CofferPush
import Crypto
import Foundation
import Hummingbird
import Mustache
import NIOCore

/// The signed-in browsers of the `/account` page, in memory: the cookie's SHA-256 → user, CSRF token, expiry.
/// A restart signs everyone out; nothing of it is written to disk.
actor AccountWebSessions {
    struct Entry {
        let user: String
        let csrf: String
        let expires: Date
    }

    private var entries: [[UInt8]: Entry] = [:]
    private let lifetime: TimeInterval
    private let now: @Sendable () -> Date

    init(lifetime: TimeInterval, now: @escaping @Sendable () -> Date) {
        self.lifetime = lifetime
        self.now = now
    }

    /// A new signed-in browser: the cookie value and its CSRF token (both 256-bit random).
    func create(user: String) -> (cookie: String, csrf: String) {
        let date = now()
        if entries.count > 10_000 { entries = entries.filter { $0.value.expires > date } }
        let cookie = AccountPage.randomToken()
        let csrf = AccountPage.randomToken()
        entries[Array(SHA256.hash(data: Array(cookie.utf8)))] = Entry(
            user: user,
            csrf: csrf,
            expires: date.addingTimeInterval(lifetime)
        )
        return (cookie, csrf)
    }

    /// The unexpired entry for a cookie value.
    func entry(cookie: String) -> Entry? {
        let key = Array(SHA256.hash(data: Array(cookie.utf8)))
        guard let entry = entries[key] else { return nil }
        guard entry.expires > now() else {
            entries[key] = nil
            return nil
        }
        return entry
    }

    /// Signs a browser out.
    func remove(cookie: String) { entries[Array(SHA256.hash(data: Array(cookie.utf8)))] = nil }
}

/// `/account`: a server-rendered page (swift-mustache) where a user signs in with their mail credentials, sees their
/// sessions (device name, created, last seen) and revokes one.
///
/// Defences: a strict CSP (`default-src 'none'`, the one inline style allowed by its hash, `form-action 'self'`,
/// `frame-ancestors 'none'`); a CSRF token on every POST (double-submit cookie before sign-in, a synchronizer
/// token bound to the signed-in browser after it); cookies `Secure; HttpOnly; SameSite=Strict`; every value
/// HTML-escaped by Mustache; sign-in rate-limited with registration's limiter, before the mail server is asked.
public enum AccountPage {
    /// The cookie of a signed-in browser.
    public static let sessionCookie = "coffer_account"
    /// The double-submit CSRF cookie of the sign-in form.
    public static let csrfCookie = "coffer_csrf"
    /// How long a browser stays signed in.
    public static let lifetime: TimeInterval = 30 * 60

    static let style = """
        body{font-family:sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}\
        table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ccc;padding:.4rem;text-align:left}\
        .error{color:#a00}label{display:block;margin:.5rem 0}
        """

    /// The Content-Security-Policy of every page.
    public static let contentSecurityPolicy =
        "default-src 'none'; style-src 'sha256-\(Data(SHA256.hash(data: Array(style.utf8))).base64EncodedString())'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static let layoutHead = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
        <title>Coffer sessions</title><style>\(style)</style></head><body>

        """

    static let signInText =
        layoutHead + """
            <h1>Coffer: your sessions</h1>
            {{#message}}<p class="error" id="message">{{message}}</p>{{/message}}
            <form method="post" action="/account/sign-in">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label>Mail user name <input name="user" autocomplete="username" required value="{{user}}"></label>
            <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
            <button type="submit">Sign in</button>
            </form>
            </body></html>

            """

    static let sessionsText =
        layoutHead + """
            <h1>Sessions of {{user}}</h1>
            <table id="sessions"><thead><tr><th>Device</th><th>Created</th><th>Last seen</th><th>State</th><th></th>
            </tr></thead><tbody>
            {{#sessions}}<tr id="s-{{id}}"><td class="device">{{deviceName}}</td><td>{{created}}</td>
            <td>{{lastSeen}}</td><td class="state">{{state}}</td><td>{{^revoked}}<form method="post"
            action="/account/revoke"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="id"
            value="{{id}}"><button type="submit">Revoke</button></form>{{/revoked}}</td></tr>
            {{/sessions}}</tbody></table>
            <form method="post" action="/account/revoke-all"><input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" id="revoke-all">Revoke every session</button></form>
            <form method="post" action="/account/sign-out"><input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" id="sign-out">Sign out</button></form>
            </body></html>

            """

    static let messageText =
        layoutHead + """
            <h1>{{title}}</h1><p id="message">{{message}}</p><p><a href="/account">Back</a></p></body></html>

            """

    struct Templates: Sendable {
        let signIn: MustacheTemplate
        let sessions: MustacheTemplate
        let message: MustacheTemplate
    }

    static func templates() throws -> Templates {
        Templates(
            signIn: try MustacheTemplate(string: signInText),
            sessions: try MustacheTemplate(string: sessionsText),
            message: try MustacheTemplate(string: messageText)
        )
    }

    /// 32 random bytes as base64url (43 characters, valid in a cookie and a form).
    static func randomToken() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Base64URL.encode(Array($0)) }
    }

    struct SignInForm: Decodable {
        var user: String?
        var password: String?
        var csrf: String?
    }

    struct ActionForm: Decodable {
        var id: String?
        var csrf: String?
    }

    /// Adds `GET /account` and `POST /account/sign-in|revoke|sign-out` to the router.
    public static func addRoutes(to router: Router<NotifyRequestContext>, service: NotifyService) {
        let templates: Templates
        do {
            templates = try Self.templates()
        } catch {
            // The templates are constants checked by the tests; a broken one leaves the page out, not the service.
            service.logger.error("the /account templates do not parse; the page is off")
            return
        }
        let browsers = AccountWebSessions(lifetime: lifetime, now: service.now)

        router.get("/account") { request, context -> Response in
            if let cookie = request.cookies[sessionCookie]?.value, let entry = await browsers.entry(cookie: cookie) {
                return try await sessionsPage(entry, service: service, templates: templates)
            }
            return signInPage(request: request, templates: templates, status: .ok, message: nil, user: "")
        }

        router.post("/account/sign-in") { request, context -> Response in
            guard let form = try await decodeForm(SignInForm.self, request, context) else {
                return page(templates, .badRequest, "Bad request", "The form could not be read.")
            }
            guard let cookie = request.cookies[csrfCookie]?.value, let sent = form.csrf, tokensMatch(cookie, sent)
            else { return page(templates, .forbidden, "Forbidden", "The form expired; reload the page.") }
            let typed = form.user ?? ""
            guard (1...320).contains(typed.utf8.count), !typed.contains(where: \.isNewline),
                let password = form.password, (1...1024).contains(password.utf8.count)
            else {
                return signInPage(
                    request: request,
                    templates: templates,
                    status: .badRequest,
                    message: "Enter your mail user name and password.",
                    user: ""
                )
            }
            let user = MailUser.canonical(typed)
            do throws(NotifyError) {
                try await service.logIn(
                    user: user,
                    password: password,
                    client: service.client(request, context)
                )
            } catch .rateLimited {
                return page(templates, .tooManyRequests, "Too many attempts", NotifyError.rateLimited.description)
            } catch {
                let status: HTTPResponse.Status = error == .wrongCredentials ? .unauthorized : .badGateway
                return signInPage(
                    request: request,
                    templates: templates,
                    status: status,
                    message: error.publicDescription,
                    user: user
                )
            }
            let (value, _) = await browsers.create(user: user)
            service.logger.info("account page signed in")
            var response = Response(status: .seeOther, headers: [.location: "/account"])
            response.headers.append(.init(name: .setCookie, value: cookieHeader(sessionCookie, value)))
            response.headers.append(.init(name: .setCookie, value: cookieHeader(csrfCookie, "", clear: true)))
            return secured(response)
        }

        router.post("/account/revoke") { request, context -> Response in
            guard let cookie = request.cookies[sessionCookie]?.value, let entry = await browsers.entry(cookie: cookie)
            else { return page(templates, .unauthorized, "Signed out", "Sign in again.") }
            guard let form = try await decodeForm(ActionForm.self, request, context) else {
                return page(templates, .badRequest, "Bad request", "The form could not be read.")
            }
            guard let sent = form.csrf, tokensMatch(entry.csrf, sent) else {
                return page(templates, .forbidden, "Forbidden", "The form expired; reload the page.")
            }
            guard let id = form.id else {
                return page(templates, .notFound, "Not found", NotifyError.sessionNotFound.description)
            }
            do throws(NotifyError) {
                try await service.revoke(id: id, ofUser: entry.user)
            } catch .sessionNotFound {
                return page(templates, .notFound, "Not found", NotifyError.sessionNotFound.description)
            }
            return secured(Response(status: .seeOther, headers: [.location: "/account"]))
        }

        router.post("/account/revoke-all") { request, context -> Response in
            guard let cookie = request.cookies[sessionCookie]?.value, let entry = await browsers.entry(cookie: cookie)
            else { return page(templates, .unauthorized, "Signed out", "Sign in again.") }
            guard let form = try await decodeForm(ActionForm.self, request, context), let sent = form.csrf,
                tokensMatch(entry.csrf, sent)
            else { return page(templates, .forbidden, "Forbidden", "The form expired; reload the page.") }
            let count = try await service.revokeAll(user: entry.user)
            service.logger.info("every session revoked from the account page", metadata: ["count": "\(count)"])
            return secured(Response(status: .seeOther, headers: [.location: "/account"]))
        }

        router.post("/account/sign-out") { request, context -> Response in
            guard let cookie = request.cookies[sessionCookie]?.value, let entry = await browsers.entry(cookie: cookie)
            else { return page(templates, .unauthorized, "Signed out", "Sign in again.") }
            guard let form = try await decodeForm(ActionForm.self, request, context), let sent = form.csrf,
                tokensMatch(entry.csrf, sent)
            else { return page(templates, .forbidden, "Forbidden", "The form expired; reload the page.") }
            await browsers.remove(cookie: cookie)
            var response = Response(status: .seeOther, headers: [.location: "/account"])
            response.headers.append(.init(name: .setCookie, value: cookieHeader(sessionCookie, "", clear: true)))
            return secured(response)
        }
    }

    /// `name=value; Path=/account; Secure; HttpOnly; SameSite=Strict` (and `Max-Age=0` to clear it).
    static func cookieHeader(_ name: String, _ value: String, clear: Bool = false) -> String {
        "\(name)=\(value); Path=/account; Max-Age=\(clear ? 0 : Int(lifetime)); Secure; HttpOnly; SameSite=Strict"
    }

    static func tokensMatch(_ expected: String, _ sent: String) -> Bool {
        guard expected.utf8.count == 43 else { return false }
        return constantTimeEqual(
            Array(SHA256.hash(data: Array(expected.utf8))),
            Array(SHA256.hash(data: Array(sent.utf8)))
        )
    }

    static func decodeForm<T: Decodable>(
        _ type: T.Type,
        _ request: Request,
        _ context: NotifyRequestContext
    ) async throws -> T? {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        return try? URLEncodedFormDecoder().decode(T.self, from: String(buffer: buffer))
    }

    static func signInPage(
        request: Request,
        templates: Templates,
        status: HTTPResponse.Status,
        message: String?,
        user: String
    ) -> Response {
        var csrf = request.cookies[csrfCookie]?.value ?? ""
        var fresh = false
        if csrf.utf8.count != 43 || Base64URL.decode(csrf)?.count != 32 {
            csrf = randomToken()
            fresh = true
        }
        var values: [String: Any] = ["csrf": csrf, "user": user]
        if let message { values["message"] = message }
        var response = html(status, templates.signIn.render(values))
        if fresh { response.headers.append(.init(name: .setCookie, value: cookieHeader(csrfCookie, csrf))) }
        return response
    }

    static func sessionsPage(
        _ entry: AccountWebSessions.Entry,
        service: NotifyService,
        templates: Templates
    ) async throws -> Response {
        let date = service.now()
        let rows: [[String: Any]] = try await service.storage.sessions(user: entry.user).map { session in
            [
                "id": session.id,
                "deviceName": session.deviceName,
                "created": session.created.ISO8601Format(),
                "lastSeen": session.lastSeen.ISO8601Format(),
                "state": session.revoked ? "revoked" : (session.isLive(at: date) ? "active" : "expired"),
                "revoked": session.revoked,
            ]
        }
        let values: [String: Any] = ["user": entry.user, "csrf": entry.csrf, "sessions": rows]
        return html(.ok, templates.sessions.render(values))
    }

    static func page(
        _ templates: Templates,
        _ status: HTTPResponse.Status,
        _ title: String,
        _ message: String
    ) -> Response {
        html(status, templates.message.render(["title": title, "message": message] as [String: Any]))
    }

    static func html(_ status: HTTPResponse.Status, _ text: String) -> Response {
        secured(
            Response(
                status: status,
                headers: [.contentType: "text/html; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: text))
            )
        )
    }

    /// The headers every /account answer carries.
    static func secured(_ response: Response) -> Response {
        var response = response
        response.headers[.contentSecurityPolicy] = contentSecurityPolicy
        response.headers[.cacheControl] = "no-store"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        return response
    }
}
