#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Parses the date formats real mail uses: RFC 5322 (with or without the day name, seconds or zone), obsolete
/// two-digit years and zone names, RFC 850 dashed dates, asctime and dotted times. The rules follow the de facto
/// reference implementation (Python's `email.utils`); a date without a usable zone, or with `-0000`, is taken as UTC.
enum DateParsing {
    private static let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
        "november", "december",
    ]
    private static let dayNames: Set<String> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let zones: [String: Int] = [
        "UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "AST": -400, "ADT": -300, "EST": -500, "EDT": -400, "CST": -600,
        "CDT": -500, "MST": -700, "MDT": -600, "PST": -800, "PDT": -700,
    ]

    private static func integer(_ text: Substring) -> Int? {
        var digits = text
        var negative = false
        if digits.first == "+" || digits.first == "-" {
            negative = digits.first == "-"
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return nil
        }
        guard let value = Int(digits) else {
            return nil
        }
        return negative ? -value : value
    }

    static func parse(_ value: String) -> Date? {
        var data = value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" })
        guard !data.isEmpty else {
            return nil
        }
        if data[0].hasSuffix(",") || dayNames.contains(data[0].lowercased()) {
            data.removeFirst()
        } else if let comma = data[0].lastIndex(of: ",") {
            data[0] = data[0][data[0].index(after: comma)...]
        }
        if data.count == 3 {
            let stuff = data[0].split(separator: "-", omittingEmptySubsequences: false)
            if stuff.count == 3 {
                data = stuff + data[1...]
            }
        }
        if data.count == 4 {
            let last = data[3]
            var split = last.firstIndex(of: "+")
            if split == nil {
                split = last.firstIndex(of: "-")
            }
            if let split, split > last.startIndex {
                data[3...] = [last[..<split], last[split...]]
            } else {
                data.append("")
            }
        }
        guard data.count >= 5 else {
            return nil
        }
        var day = data[0]
        var month = data[1].lowercased()
        var year = data[2]
        var time = data[3]
        var zone = data[4]
        guard !day.isEmpty, !month.isEmpty, !year.isEmpty else {
            return nil
        }
        if !months.contains(month) {
            (day, month) = (Substring(month), day.lowercased())
            guard months.contains(month) else {
                return nil
            }
        }
        var monthNumber = months.firstIndex(of: month)! + 1
        if monthNumber > 12 {
            monthNumber -= 12
        }
        if day.hasSuffix(",") {
            day = day.dropLast()
        }
        if let colon = year.firstIndex(of: ":"), colon > year.startIndex {
            (year, time) = (time, year)
        }
        if year.hasSuffix(",") {
            year = year.dropLast()
            guard !year.isEmpty else {
                return nil
            }
        }
        if let first = year.first, !(first.isASCII && first.isNumber) {
            (year, zone) = (zone, year)
        }
        guard !time.isEmpty else {
            return nil
        }
        if time.hasSuffix(",") {
            time = time.dropLast()
        }
        var clock = time.split(separator: ":", omittingEmptySubsequences: false)
        if clock.count == 1 && time.contains(".") {
            clock = time.split(separator: ".", omittingEmptySubsequences: false)
        }
        guard clock.count == 2 || clock.count == 3 else {
            return nil
        }
        guard var yearNumber = integer(year), let dayNumber = integer(day), let hour = integer(clock[0]),
            let minute = integer(clock[1])
        else {
            return nil
        }
        var second = 0
        if clock.count == 3 {
            guard let parsed = integer(clock[2]) else {
                return nil
            }
            second = parsed
        }
        if yearNumber < 100 {
            yearNumber += yearNumber > 68 ? 1900 : 2000
        }
        var offset = 0
        let zoneName = zone.uppercased()
        if let known = zones[zoneName] {
            offset = known
        } else if let number = integer(zone) {
            offset = number
        }
        let seconds = (offset < 0 ? -1 : 1) * ((abs(offset) / 100) * 3600 + (abs(offset) % 100) * 60)
        guard abs(seconds) < 86_400, (1...9999).contains(yearNumber), (0...23).contains(hour),
            (0...59).contains(minute), (0...59).contains(second),
            (1...daysInMonth(monthNumber, year: yearNumber)).contains(dayNumber)
        else {
            return nil
        }
        let days = daysFromCivil(year: yearNumber, month: monthNumber, day: dayNumber)
        let epoch = days * 86_400 + hour * 3600 + minute * 60 + second - seconds
        return Date(timeIntervalSince1970: TimeInterval(epoch))
    }

    private static func daysInMonth(_ month: Int, year: Int) -> Int {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
