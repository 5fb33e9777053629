@_spi(Benchmark) import CofferContent
import CofferHTML
import CofferSampleMail
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Parse and sanitize throughput on generated marketing and newsletter HTML, beside nh3 (ammonia, from PyPI) on the
/// same files in the same run (`scripts/bench_nh3.py` in the repository's `.venv`, which `scripts/setup.sh` makes).
enum SanitizeBench {
    static let messageCount = 48

    static func run() throws {
        let corpus = NewsletterCorpus.generate(count: messageCount)
        let total = corpus.reduce(0) { $0 + $1.count }
        let folder = try writeCorpus(corpus)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let sizes = corpus.map(\.count).sorted()
        print(
            "\nsanitize corpus: \(corpus.count) newsletters, \(format(Double(total) / 1e6, 2)) MB, "
                + "\(sizes.first! / 1024)–\(sizes.last! / 1024) KiB each (median \(sizes[sizes.count / 2] / 1024) KiB)"
        )

        let sanitizer = MailSanitizer()
        let allowing = sanitizer.allowingRemoteContent()
        var blocked = 0
        let nh3 = NH3Worker(folder: folder)
        let rates = alternating(
            bytes: total,
            rounds: 5,
            coffer: [
                { for html in corpus { _ = HTMLParser.parseDocument(html) } },
                {
                    blocked = 0
                    for html in corpus { blocked += sanitizer.sanitize(html: html).blockedRemoteContentCount }
                },
                { for html in corpus { _ = allowing.sanitize(html: html) } },
                { for html in corpus { _ = sanitizer.sanitizeReparsingAlways(html: html) } },
            ],
            nh3: nh3,
            profiles: ["default", "mail"]
        )
        nh3?.stop()
        let (parse, sanitize, sanitizeAllowing, reparsing) = (
            rates.coffer[0], rates.coffer[1], rates.coffer[2], rates.coffer[3]
        )
        let provenBlocked = corpus.filter { sanitizer.stabilityProofHolds(html: $0) }.count
        let provenAllowed = corpus.filter { allowing.stabilityProofHolds(html: $0) }.count

        var table = Table(
            "HTML parse and sanitize, \(corpus.count) newsletters (\(format(Double(total) / 1e6, 1)) MB), one core, "
                + "medians of 5 rounds alternating Coffer and nh3",
            ["operation", "MB/s", "nh3 default MB/s", "ratio", "nh3 mail profile MB/s", "ratio"]
        )
        func row(_ name: String, _ rate: Double) {
            let base = rates.nh3[0]
            let mail = rates.nh3[1]
            table.add([
                name, format(rate, 1), base.map { format($0, 1) } ?? "n/a", base.map { format(rate / $0, 2) } ?? "n/a",
                mail.map { format($0, 1) } ?? "n/a", mail.map { format(rate / $0, 2) } ?? "n/a",
            ])
        }
        row("CofferHTML parse (document)", parse)
        row("parse + sanitize, remote blocked", sanitize)
        row("parse + sanitize, remote allowed", sanitizeAllowing)
        row("parse + sanitize, blocked, reparse check on every message", reparsing)
        table.print()
        print(
            "(sanitize proves its output stable in one walk of the tree (ParseStability) and parses and sanitizes "
                + "it again only when the proof fails; the last row forces that reparse to show what the proof saves; "
                + "\(blocked) remote resources blocked in the corpus; nh3 runs ammonia, which keeps no <style> "
                + "and checks no CSS property values)"
        )
        print(
            "(the stability proof holds for \(provenBlocked) of \(corpus.count) messages with remote content blocked, "
                + "\(provenAllowed) allowed; the others are parsed and sanitized again)"
        )
        if nh3 == nil { print("(nh3 not measured: run scripts/setup.sh to create .venv with nh3)") }
        try flood()
        try render()
    }

    /// Markup made to find work that grows faster than the input: tags with `count` attributes each, as one
    /// element, a repeated `body` (whose attributes are merged), four alike formatting elements reconstructed after a
    /// paragraph (their attribute sets compared) and a table.
    static func attributeFlood(count: Int) -> [[UInt8]] {
        let attributes = (0..<count).map { "data-a\($0)=1" }.joined(separator: " ")
        let tag = { (name: String) in "<\(name) \(attributes)>" }
        return [
            tag("div") + "x</div>",
            tag("body") + "x" + tag("body") + "y",
            "<p>" + String(repeating: tag("b"), count: 4) + "x<p>y",
            tag("table") + tag("tr") + tag("td") + "x</table>",
        ].map { Array($0.utf8) }
    }

    /// Parse + sanitize (remote blocked) of ``attributeFlood(count:)`` and nh3 `clean` of the same files, MB/s, the
    /// medians of `rounds` alternating rounds; nh3's is nil without nh3.
    static func floodRates(count: Int, rounds: Int) throws -> (coffer: Double, nh3: Double?, bytes: Int) {
        let corpus = attributeFlood(count: count)
        let rates = try ratesBesideNH3(corpus: corpus, rounds: rounds)
        return (rates.coffer, rates.nh3, corpus.reduce(0) { $0 + $1.count })
    }

    static func flood() throws {
        let count = 20_000
        let (rate, nh3, bytes) = try floodRates(count: count, rounds: 3)
        var table = Table(
            "Tags with \(count) attributes each (hostile markup, 4 files, \(format(Double(bytes) / 1e6, 1)) MB), "
                + "medians of 3 rounds alternating Coffer and nh3",
            ["operation", "MB/s", "nh3 default MB/s", "ratio"]
        )
        table.add([
            "parse + sanitize, remote blocked", format(rate, 1), nh3.map { format($0, 1) } ?? "n/a",
            nh3.map { format(rate / $0, 2) } ?? "n/a",
        ])
        table.print()
    }

    /// `coffer render` of one 8 MB marketing page (thousands of images and tracked links, inline styles), as a user
    /// runs it: process start, reading the file, sanitizing, the remote-content report and writing the page; beside
    /// nh3 `clean` on the same bytes.
    static func render() throws {
        let (rate, nh3, size) = try renderRates(bytes: 8_000_000, rounds: 3)
        var table = Table(
            "coffer render of one \(format(Double(size) / 1e6, 1)) MB marketing page (medians of 3 runs alternating "
                + "with nh3's)",
            ["operation", "MB/s", "nh3 clean MB/s, same bytes", "ratio"]
        )
        table.add([
            "coffer render (process, sanitize, report, page written)", format(rate, 1),
            nh3.map { format($0, 1) } ?? "n/a", nh3.map { format(rate / $0, 2) } ?? "n/a",
        ])
        table.print()
    }

    /// `coffer render`'s MB/s on one generated marketing page of about `bytes` bytes and nh3 `clean`'s on the same
    /// bytes (nil without nh3), each the median of `rounds` rounds that alternate the two after one uncounted round
    /// (which also warms the page cache), and the page's size.
    static func renderRates(bytes: Int, rounds: Int) throws -> (coffer: Double, nh3: Double?, size: Int) {
        var random = SplitMix(seed: 0x8E_4D_E7)
        let page = Array(NewsletterCorpus.message(8, target: bytes, random: &random).utf8)
        let folder = try writeCorpus([page])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let coffer = ImportMemoryBench.siblingBinary("coffer")
        let nh3 = NH3Worker(folder: folder)
        defer { nh3?.stop() }
        var failure: Error?
        var round = 0
        let rates = alternating(
            bytes: page.count,
            rounds: rounds,
            coffer: [
                {
                    round += 1
                    do {
                        _ = try ImportMemoryBench.spawn([
                            coffer, "render", "\(folder)/0.html", "--output", "\(folder)/out\(round)",
                        ])
                    } catch { failure = error }
                }
            ],
            nh3: nh3,
            profiles: ["default"]
        )
        if let failure { throw failure }
        return (rates.coffer[0], rates.nh3[0], page.count)
    }

    /// Parse and sanitize (remote content blocked) of `count` newsletters over nh3's default `clean` of the same
    /// files, in the same run; nil without nh3. For `--check`.
    static func ratioToNH3(count: Int) throws -> Double? {
        let rates = try ratesBesideNH3(corpus: NewsletterCorpus.generate(count: count), rounds: 5)
        return rates.nh3.map { rates.coffer / $0 }
    }

    /// Parse + sanitize (remote blocked) of `corpus` and nh3's default `clean` of the same files, MB/s, the medians of
    /// `rounds` alternating rounds; nh3's is nil without nh3.
    static func ratesBesideNH3(corpus: [[UInt8]], rounds: Int) throws -> (coffer: Double, nh3: Double?) {
        let folder = try writeCorpus(corpus)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let nh3 = NH3Worker(folder: folder)
        defer { nh3?.stop() }
        let sanitizer = MailSanitizer()
        let rates = alternating(
            bytes: corpus.reduce(0) { $0 + $1.count },
            rounds: rounds,
            coffer: [{ for html in corpus { _ = sanitizer.sanitize(html: html) } }],
            nh3: nh3,
            profiles: ["default"]
        )
        return (rates.coffer[0], rates.nh3[0])
    }

    /// MB/s over `bytes` of each Coffer body and each nh3 profile: the medians of `rounds` rounds in which each runs
    /// once, one after another, so that both sides meet the same state of a shared machine; after one uncounted
    /// round. An nh3 figure is nil without nh3 or when its process fails.
    static func alternating(
        bytes: Int,
        rounds: Int,
        coffer: [() -> Void],
        nh3: NH3Worker?,
        profiles: [String]
    ) -> (coffer: [Double], nh3: [Double?]) {
        var cofferRates = [[Double]](repeating: [], count: coffer.count)
        var nh3Rates = [[Double]](repeating: [], count: profiles.count)
        var nh3Failed = nh3 == nil
        for round in 0...rounds {
            for (index, body) in coffer.enumerated() {
                let start = Timer.now()
                body()
                if round > 0 { cofferRates[index].append(Double(bytes) / 1e6 / (Double(Timer.now() - start) / 1e9)) }
            }
            for (index, profile) in profiles.enumerated() where !nh3Failed {
                guard let rate = nh3?.round(profile) else {
                    nh3Failed = true
                    continue
                }
                if round > 0 { nh3Rates[index].append(rate) }
            }
        }
        return (cofferRates.map { percentiles($0).p50 }, nh3Rates.map { nh3Failed ? nil : percentiles($0).p50 })
    }

    static func writeCorpus(_ corpus: [[UInt8]]) throws -> String {
        var template = Array("\(NSTemporaryDirectory())/coffer-bench-html-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        let folder = String(cString: made)
        for (index, html) in corpus.enumerated() {
            try Data(html).write(to: URL(fileURLWithPath: "\(folder)/\(index).html"))
        }
        return folder
    }

}

/// nh3 in a Python process of its own (`scripts/bench_nh3.py` in the repository's `.venv`, which `scripts/setup.sh`
/// makes), kept running so that its rounds can alternate with Coffer's: ``round(_:)`` times one pass of a profile over
/// the folder's files.
final class NH3Worker {
    private let process = Process()
    private let requests = Pipe()
    private let replies = Pipe()
    private var pending = Data()

    /// Starts the worker on `folder`'s `.html` files; nil when the venv or nh3 is missing.
    init?(folder: String) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let python = root.appendingPathComponent(".venv/bin/python").path
        let script = root.appendingPathComponent("scripts/bench_nh3.py").path
        guard FileManager.default.isExecutableFile(atPath: python) else { return nil }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, folder]
        process.standardInput = requests
        process.standardOutput = replies
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        guard readLine() == "ready" else {
            stop()
            return nil
        }
    }

    /// The MB/s of one pass of `profile` (`default` or `mail`) over the files; nil when the worker failed.
    func round(_ profile: String) -> Double? {
        do { try requests.fileHandleForWriting.write(contentsOf: Data("\(profile)\n".utf8)) } catch { return nil }
        return readLine().flatMap(Double.init)
    }

    /// Ends the worker and waits for it.
    func stop() {
        try? requests.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    private func readLine() -> String? {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                return line
            }
            let more = replies.fileHandleForReading.availableData
            if more.isEmpty { return nil }
            pending.append(more)
        }
    }
}

/// Deterministic marketing and newsletter HTML as senders' tools produce it: table layouts with presentational
/// attributes, a `<style>` block with media queries, inline styles everywhere, MSO conditional comments, entities,
/// many images and tracked links, social icons, a footer, and a tracking pixel.
enum NewsletterCorpus {
    static func generate(count: Int) -> [[UInt8]] {
        var random = SplitMix(seed: 0xC0FF_EE00)
        return (0..<count).map { index in
            let target = 50_000 + Int(random.next() % 150_000)
            return Array(message(index, target: target, random: &random).utf8)
        }
    }

    static let words = """
        lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore \
        magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo \
        consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint \
        occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum sale offer new \
        spring collection free shipping members only limited time discover shop now exclusive
        """.split(separator: " ").map(String.init)
    static let colors = ["#ffffff", "#f4f4f4", "#222222", "#e94e1b", "#0a66c2", "#333333", "#fafafa", "#1a1a1a"]
    static let fonts = ["Arial, Helvetica, sans-serif", "'Helvetica Neue', Helvetica, Arial", "Georgia, serif"]

    static func text(_ count: Int, _ random: inout SplitMix) -> String {
        (0..<count).map { _ in words[Int(random.next() % UInt64(words.count))] }.joined(separator: " ")
    }

    static func pick<T>(_ list: [T], _ random: inout SplitMix) -> T { list[Int(random.next() % UInt64(list.count))] }

    static func link(_ path: String, _ random: inout SplitMix) -> String {
        "https://click.news.example.com/ls/click?upn=\(random.next() % 1_000_000_000)-\(path)"
            + "&amp;utm_source=newsletter&amp;utm_medium=email&amp;utm_campaign=spring\(random.next() % 100)"
    }

    static func message(_ index: Int, target: Int, random: inout SplitMix) -> String {
        let font = pick(fonts, &random)
        var html = """
            <!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" \
            "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
            <html xmlns="http://www.w3.org/1999/xhtml" xmlns:v="urn:schemas-microsoft-com:vml" \
            xmlns:o="urn:schemas-microsoft-com:office:office"><head>
            <meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
            <meta name="viewport" content="width=device-width, initial-scale=1.0">
            <title>Newsletter \(index): \(text(6, &random))</title>
            <!--[if mso]><xml><o:OfficeDocumentSettings><o:PixelsPerInch>96</o:PixelsPerInch>\
            </o:OfficeDocumentSettings></xml><![endif]-->
            <style type="text/css">
            body{margin:0;padding:0;-webkit-text-size-adjust:100%;-ms-text-size-adjust:100%;background-color:#f4f4f4}
            table,td{border-collapse:collapse;mso-table-lspace:0pt;mso-table-rspace:0pt}
            img{border:0;height:auto;line-height:100%;outline:none;text-decoration:none;-ms-interpolation-mode:bicubic}
            a[x-apple-data-detectors]{color:inherit!important;text-decoration:none!important}
            .button a{display:inline-block;padding:12px 24px;border-radius:4px;font-weight:bold}
            .hero{background-image:url(https://cdn.news.example.com/img/hero-bg-\(index).jpg);background-size:cover}
            @font-face{font-family:'Brand';src:url(https://fonts.news.example.com/brand.woff2) format('woff2')}

            """
        for rule in 0..<(30 + Int(random.next() % 40)) {
            html += ".c\(rule) td.col-\(rule % 7), .c\(rule) > p{color:\(pick(colors, &random));"
            html += "font-family:\(font);font-size:\(12 + rule % 8)px;line-height:\(18 + rule % 6)px;"
            html += "padding:\(rule % 5 * 4)px \(rule % 3 * 8)px}\n"
        }
        html += """
            @media only screen and (max-width:600px){.wrapper{width:100%!important}.col{display:block!important;\
            width:100%!important}.hide-mobile{display:none!important;max-height:0;overflow:hidden}}
            </style></head>
            <body style="margin:0;padding:0;background-color:#f4f4f4;" bgcolor="#f4f4f4">
            <div style="display:none;font-size:1px;color:#f4f4f4;line-height:1px;max-height:0px;max-width:0px;\
            opacity:0;overflow:hidden;">\(text(20, &random))&nbsp;&zwnj;&nbsp;&zwnj;&nbsp;&zwnj;</div>
            <center><table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" \
            bgcolor="#f4f4f4"><tr><td align="center" valign="top">
            <!--[if (gte mso 9)|(IE)]><table width="600" align="center" cellpadding="0" cellspacing="0" border="0">\
            <tr><td><![endif]-->
            <table class="wrapper" width="600" cellpadding="0" cellspacing="0" border="0" \
            style="width:600px;max-width:600px;background:#ffffff;">
            <tr><td class="hero" align="center" style="padding:20px 0;" \
            background="https://cdn.news.example.com/img/header-\(index).png">\
            <a href="\(link("logo", &random))" target="_blank"><img src="https://cdn.news.example.com/logo.png" \
            width="180" height="48" alt="Brand" style="display:block;border:0;"></a></td></tr>

            """
        var block = 0
        while html.utf8.count < target - 4000 {
            block += 1
            let color = pick(colors, &random)
            html += """
                <tr><td class="c\(block % 50)" style="padding:24px 32px;background-color:\(color);" \
                bgcolor="\(color)">
                <table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr>
                <td class="col col-\(block % 7)" width="260" valign="top" style="padding:0 10px 0 0;">\
                <a href="\(link("img\(block)", &random))"><img src="https://cdn.news.example.com/products/\
                \(index)-\(block).jpg" width="260" height="\(160 + block % 80)" alt="\(text(3, &random))" \
                style="display:block;width:100%;max-width:260px;height:auto;border-radius:6px;"></a></td>
                <td class="col" valign="top" style="padding:0 0 0 10px;font-family:\(font);">
                <h2 style="margin:0 0 8px;font-size:22px;line-height:28px;color:#1a1a1a;font-weight:700;">\
                \(text(5, &random))</h2>
                <p style="margin:0 0 12px;font-size:15px;line-height:22px;color:#333333;">\(text(45, &random)) \
                <a href="\(link("text\(block)", &random))" style="color:#0a66c2;text-decoration:underline;">\
                \(text(3, &random))</a> &amp; \(text(25, &random)) &copy; &mdash; &#8211; &#x2019;</p>
                <font face="Arial" size="2" color="#666666"><b>\(text(4, &random))</b> <i>\(text(6, &random))</i>\
                </font>
                <table role="presentation" cellpadding="0" cellspacing="0" border="0" class="button"><tr>\
                <td align="center" bgcolor="#e94e1b" style="border-radius:4px;background:#e94e1b;">\
                <a href="\(link("cta\(block)", &random))" target="_blank" style="font-size:16px;\
                font-family:\(font);color:#ffffff;text-decoration:none;padding:12px 24px;display:inline-block;">\
                Shop now &rarr;</a></td></tr></table>
                </td></tr></table></td></tr>

                """
            if block % 4 == 0 {
                html += """
                    <tr><td align="center" style="padding:16px;"><table role="presentation"><tr>
                    <td><a href="\(link("fb", &random))"><img src="https://cdn.news.example.com/social/fb.png" \
                    width="32" height="32" alt="Facebook"></a></td>
                    <td><a href="\(link("tw", &random))"><img src="https://cdn.news.example.com/social/x.png" \
                    width="32" height="32" alt="X"></a></td>
                    <td><a href="\(link("ig", &random))"><img src="https://cdn.news.example.com/social/ig.png" \
                    width="32" height="32" alt="Instagram"></a></td></tr></table></td></tr>

                    """
            }
        }
        html += """
            <tr><td align="center" style="padding:24px;font-size:12px;line-height:18px;color:#999999;\
            font-family:\(font);">\(text(40, &random))<br>
            <a href="\(link("unsubscribe", &random))" style="color:#999999;">Unsubscribe</a> | \
            <a href="\(link("prefs", &random))" style="color:#999999;">Preferences</a> | \
            <a href="mailto:help@news.example.com">Contact</a><br>Brand Inc., 1 Market Street, Springfield</td></tr>
            </table>
            <!--[if (gte mso 9)|(IE)]></td></tr></table><![endif]-->
            </td></tr></table></center>
            <img src="https://open.news.example.com/o/\(random.next())/pixel.gif" width="1" height="1" border="0" \
            alt="" style="height:1px!important;width:1px!important;border-width:0!important;">
            </body></html>

            """
        return html
    }
}
