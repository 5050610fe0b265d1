import AdRuntime
import AdPlayerDaemon
import ControlProtocol
import Foundation

/// What a simulation tells: `report.xml` (JUnit, one test case a rule, each failure its
/// ad, time and evidence — what CI systems read) and `summary.txt` (for a person).
public enum SimulationReport {
    /// The JUnit XML of `results` (the common schema of Jenkins, GitLab, GitHub's reporters and
    /// `junitparser`). Deterministic: no wall-clock time, no host name.
    public static func junit(_ results: [SimulationRules.Result], from: Double, seconds: Double, configuration: Configuration) -> String {
        let failed = results.filter { !$0.passed }.count
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml += "<testsuites name=\"adplayerd simulate\" tests=\"\(results.count)\" failures=\"\(failed)\" errors=\"0\" time=\"0\">\n"
        xml += "  <testsuite name=\"rules\" tests=\"\(results.count)\" failures=\"\(failed)\" errors=\"0\" skipped=\"0\" time=\"0\" "
            + "timestamp=\"\(escape(ISO8601.format(from)))\">\n"
        xml += "    <properties>\n"
        for (name, value) in [("from", ISO8601.format(from)), ("for", String(format: "%g s", seconds)),
                              ("ads", configuration.ads.joined(separator: " ")),
                              ("library", configuration.library.joined(separator: " "))] {
            xml += "      <property name=\"\(escape(name))\" value=\"\(escape(value))\"/>\n"
        }
        xml += "    </properties>\n"
        for result in results {
            xml += "    <testcase classname=\"adplayerd.simulate\" name=\"\(escape(result.name))\" time=\"0\">\n"
            if !result.passed {
                let first = result.failures[0]
                let details = result.failures.map { "\(ISO8601.format($0.at)) \($0.message)" }.joined(separator: "\n")
                    + (result.failureCount > result.failures.count ? "\n… and \(result.failureCount - result.failures.count) more" : "")
                xml += "      <failure type=\"rule\" message=\"\(escape("\(result.failureCount) failure\(result.failureCount == 1 ? "" : "s"); first: \(first.message)"))\">"
                    + escape(details) + "</failure>\n"
            }
            xml += "      <system-out>\(escape(result.checked))</system-out>\n"
            xml += "    </testcase>\n"
        }
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

    /// Text for XML: the five entities, and control characters (which XML 1.0 forbids) as `\u{…}`.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n", "\t": out.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value) || (0xD800...0xDFFF).contains(scalar.value) {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    /// The levels ads with sound played at (R28), for the summary; each ad's own is in its
    /// `ad.started` in the timeline and its row in plays.csv.
    public struct LoudnessTally: Sendable {
        var ads = 0
        var gains: ClosedRange<Double>?
        var fixedTarget = 0
        var dynamic = 0
        var asMastered = 0

        public init() {}

        public mutating func add(_ decision: LoudnessDecision) {
            ads += 1
            if let gain = decision.gain { gains = gains.map { min($0.lowerBound, gain)...max($0.upperBound, gain) } ?? gain...gain }
            if decision.target != nil, decision.content == nil { fixedTarget += 1 }
            if decision.dynamic { dynamic += 1 }
            if decision.target == nil { asMastered += 1 }
        }

        /// Nil when no ad with sound played.
        public var line: String? {
            guard ads > 0 else { return nil }
            var parts = ["\(ads) ads with sound"]
            if let gains { parts.append(String(format: "gains %+.1f to %+.1f dB", gains.lowerBound, gains.upperBound)) }
            if fixedTarget > 0 { parts.append("\(fixedTarget) at the fixed target (the episode's loudness not known: not measured yet, or silent)") }
            if dynamic > 0 { parts.append("\(dynamic) normalised as they played (not measured)") }
            if asMastered > 0 { parts.append("\(asMastered) as mastered (ad-loudness = off)") }
            return "loudness (R28): " + parts.joined(separator: ", ")
        }
    }

    public static func summary(_ results: [SimulationRules.Result], from: Double, seconds: Double, ads: Int, plays: Int, requests: Int, unanswered: Int = 0,
                               beacons: Int, loudness: LoudnessTally = LoudnessTally()) -> String {
        // `unanswered`: requests the server did not answer in time (each cost the run its bounded real wait, the box its deadline).
        var lines = ["adplayerd simulate: \(ISO8601.format(from)) + \(String(format: "%g", seconds)) s: "
                     + "\(ads) ads started, \(plays) plays in the ledger, \(requests) ad requests"
                     + (unanswered > 0 ? " (\(unanswered) unanswered: timed out)" : "") + ", \(beacons) beacons"]
        if let line = loudness.line { lines.append(line) }
        for result in results {
            lines.append("  \(result.passed ? "PASS" : "FAIL") \(result.name): \(result.checked)"
                         + (result.passed ? "" : ", \(result.failureCount) failure\(result.failureCount == 1 ? "" : "s")"))
            for failure in result.failures.prefix(5) { lines.append("       \(ISO8601.format(failure.at)) \(OneLine.escape(failure.message))") }
            if result.failureCount > 5 { lines.append("       … \(result.failureCount - 5) more in report.xml") }
        }
        let failed = results.filter { !$0.passed }.count
        lines.append(failed == 0 ? "every rule held" : "\(failed) rule\(failed == 1 ? "" : "s") failed")
        return lines.joined(separator: "\n") + "\n"
    }
}
