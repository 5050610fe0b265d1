import AdPlayerDaemon
import ControlProtocol
import Foundation

/// `adplayerd manual PAGE [--docs DIR]`: the man pages and `adplayerctl`'s bash completion,
/// made from what the programs themselves know — the command table (`Commands.all`: every
/// command, its words, options, tier), the configuration's keys (`Configuration.keys`, with
/// their placeholders and switches), each tool's usage, the events' names — and, for a key's
/// meaning and default, the one table of docs/configuration.md (a test holds that table to the
/// keys). A new command or key reaches them with no other place to edit. `make install` and
/// `make deb` write them from the release build.
struct ManualCommand {
    static let pages = ["adplayerd.8", "adplayerd.conf.5", "adplayerctl.1", "adplayerctl.bash"]
    static let usage = """
        usage: adplayerd manual \(pages.joined(separator: "|")) [--docs DIR]
          a man page (roff) or adplayerctl's bash completion on stdout, made from the command table and
          the configuration's keys; a key's meaning from DIR/configuration.md (DIR: ./docs)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["docs": .value])
        guard parsed.positional.count == 1, let page = parsed.positional.first, Self.pages.contains(page) else {
            throw UsageError("manual takes one of \(Self.pages.joined(separator: ", "))")
        }
        let text: String
        switch page {
        case "adplayerctl.1": text = Manual.adplayerctl()
        case "adplayerctl.bash": text = Manual.bashCompletion()
        default:
            let folder = parsed.value("docs") ?? "docs"
            let table: String
            do {
                table = try String(contentsOfFile: folder + "/configuration.md", encoding: .utf8)
            } catch {
                throw UsageError("--docs: \(folder)/configuration.md cannot be read (the keys' meanings are there)")
            }
            let keys = try Manual.KeyTable(markdown: table)
            text = page == "adplayerd.8" ? Manual.adplayerd(keys) : Manual.configuration(keys)
        }
        FileHandle.standardOutput.write(Data(text.utf8))
        return 0
    }
}

/// The pages themselves, in plain man(7) macros (`man --warnings` and lintian read them clean).
enum Manual {
    static let date = "2026-12-07"

    /// Every configuration key's default and meaning, from docs/configuration.md's table: a row
    /// names one or more keys in backquotes in its first column.
    struct KeyTable {
        struct Row {
            let defaultValue: String
            let meaning: String
        }
        let rows: [String: Row]

        init(markdown: String) throws {
            var rows: [String: Row] = [:]
            for line in markdown.split(separator: "\n") where line.hasPrefix("| `") {
                let cells = Self.cells(String(line))
                guard cells.count >= 3 else { continue }
                for name in Self.quoted(cells[0]) where rows[name] == nil { rows[name] = Row(defaultValue: cells[1], meaning: cells[2]) }
            }
            let missing = Configuration.keys.filter { rows[$0] == nil }
            guard missing.isEmpty else { throw UsageError("configuration.md has no row for \(missing.joined(separator: ", "))") }
            self.rows = rows
        }

        /// A row's cells, `\|` kept as a bar inside a cell.
        static func cells(_ line: String) -> [String] {
            var cells: [String] = []
            var cell = ""
            var escaped = false
            for character in line.dropFirst() {
                if escaped {
                    cell.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "|" {
                    cells.append(cell.trimmingCharacters(in: .whitespaces))
                    cell = ""
                } else {
                    cell.append(character)
                }
            }
            return cells
        }

        static func quoted(_ cell: String) -> [String] {
            cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        }
    }

    // MARK: - roff

    /// Text for roff: backslashes and a leading dot or quote escaped; markdown's `code` and
    /// **strong** in bold, its links as their text.
    static func roff(_ markdown: String) -> String {
        var out = ""
        var bold = false
        var index = markdown.startIndex
        while index < markdown.endIndex {
            let character = markdown[index]
            let rest = markdown[index...]
            if rest.hasPrefix("**") || character == "`" {
                out += bold ? "\\fR" : "\\fB"
                bold.toggle()
                index = markdown.index(index, offsetBy: rest.hasPrefix("**") ? 2 : 1)
                continue
            }
            switch character {
            case "\\": out += "\\e"
            case "-": out += bold ? "\\-" : "-"
            default: out.append(character)
            }
            index = markdown.index(after: index)
        }
        if bold { out += "\\fR" }
        return out.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
    }

    static func header(_ name: String, _ section: Int, _ title: String) -> [String] {
        [".\\\" Made by `adplayerd manual \(name).\(section)` from the command table and the configuration's keys: do not edit.",
         ".TH \(name.uppercased()) \(section) \(date) \"adplayerd \(Product.version)\" \"adplayerd\"",
         ".SH NAME", "\(roff(name)) \\- \(roff(title))"]
    }

    /// A usage text as a literal block.
    static func literal(_ text: String) -> [String] {
        [".PP", ".nf"] + text.split(separator: "\n").map { roff(String($0)).replacingOccurrences(of: "-", with: "\\-") } + [".fi"]
    }

    static func flag(_ key: String) -> String {
        let placeholder = Configuration.switches.contains(key) ? "" : " \\fI\(roff(Configuration.placeholder(key)))\\fR"
        return "\\fB\\-\\-\(key.replacingOccurrences(of: "-", with: "\\-"))\\fR" + placeholder
    }

    // MARK: - adplayerd(8)

    static func adplayerd(_ keys: KeyTable) -> String {
        var lines = header("adplayerd", 8, "a playback daemon for Linux boxes: episodes through libmpv with video ads")
        lines += [".SH SYNOPSIS", ".B adplayerd", "[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fIOPTION\\fR...]", ".br",
                  ".B adplayerd", "\\fITOOL\\fR [\\fIARGUMENTS\\fR...]",
                  ".SH DESCRIPTION",
                  roff("adplayerd plays local episodes through libmpv and runs a video-ads runtime that follows the player: overlays over "
                       + "playing content only, pause ads while the viewer is paused, pre-, mid- and post-rolls, each play recorded in a "
                       + "hash-chained ledger a buyer can verify. It is controlled through a Unix socket (adplayerctl(1)), a schedule, "
                       + "a web page (adplayerd web) and an MQTT bridge (adplayerd mqtt), and runs under systemd (Type=notify, "
                       + "with a watchdog)."),
                  ".PP",
                  roff("Every key of the configuration file adplayerd.conf(5) is also an option, `--KEY VALUE` (a switch takes no value); "
                       + "options given on the command line win over the file. Paths in the configuration are absolute; a tool's paths "
                       + "may be relative to the working directory."),
                  ".SH OPTIONS"]
        for key in Configuration.keys {
            let row = keys.rows[key]!
            lines += [".TP", flag(key), roff(row.meaning) + (["", "–", "-"].contains(row.defaultValue) ? "" : " (Default: \(roff(row.defaultValue)).)")]
        }
        lines += [".SH TOOLS", roff("With a first word, adplayerd runs one tool and exits: 0 done, 1 an input failed (one line naming it), "
                                    + "2 bad usage (the tool's usage and the problem).")]
        for usage in [CheckConfigCommand.usage, BeaconsCommand.usage, PlaysCommand.usage, AdsCheckCommand.usage, ScheduleCheckCommand.usage,
                      SimulateCommand.usage, ManualCommand.usage] {
            lines += literal(usage)
        }
        lines += [".TP", "\\fBweb\\fR ...", roff("the status page, health and metrics over HTTP (adplayerd-web)"),
                  ".TP", "\\fBmqtt\\fR ...", roff("the fleet bridge to an MQTT broker (adplayerd-mqtt)"),
                  ".SH SIGNALS",
                  ".TP", "\\fBSIGTERM\\fR, \\fBSIGINT\\fR",
                  roff("stop: ads ended, positions saved, beacons given 2 s, exit 0; a second signal exits at once."),
                  ".TP", "\\fBSIGHUP\\fR",
                  roff("reload the configuration file, the ad source and the schedule; a file that does not check out keeps what runs."),
                  ".SH FILES",
                  ".TP", "\\fI/etc/adplayerd.conf\\fR", roff("the configuration (adplayerd.conf(5))."),
                  ".TP", "\\fI/var/lib/adplayerd\\fR", roff("the state: queue, positions, beacon outbox, proof of play (adplayerd.sqlite)."),
                  ".TP", "\\fI/run/adplayerd/control.sock\\fR", roff("the control socket (adplayerctl(1))."),
                  ".TP", "\\fI/var/cache/adplayerd\\fR", roff("VAST creatives kept for offline use."),
                  ".SH EXIT STATUS", roff("0 stopped by a signal; 1 failed while running; 2 a configuration or usage that cannot be used."),
                  ".SH SEE ALSO", "\\fBadplayerctl\\fR(1), \\fBadplayerd.conf\\fR(5), \\fBmpv\\fR(1), \\fBsystemd.service\\fR(5)",
                  ".PP", roff("/usr/share/doc/adplayerd/ (README.md, configuration.md, protocol.md, operating.md …)")]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - adplayerd.conf(5)

    static func configuration(_ keys: KeyTable) -> String {
        var lines = header("adplayerd.conf", 5, "the configuration of adplayerd")
        lines += [".SH SYNOPSIS", "\\fI/etc/adplayerd.conf\\fR (the system unit), \\fI~/.config/adplayerd/adplayerd.conf\\fR (the user unit)",
                  ".SH DESCRIPTION",
                  roff("One `key = value` a line; `#` starts a comment; a value may be in double quotes. A key marked repeatable may be "
                       + "given again (its values in order). Every key is also an option of adplayerd(8), `--key value`. "
                       + "`adplayerd check-config --config FILE` checks a file without starting the daemon; SIGHUP reloads it."),
                  ".SH KEYS"]
        for key in Configuration.keys where key != "config" {   // a file cannot name another
            let row = keys.rows[key]!
            var head = "\\fB\(key.replacingOccurrences(of: "-", with: "\\-"))\\fR"
            head += Configuration.switches.contains(key) ? " = \\fIyes\\fR|\\fIno\\fR" : " = \\fI\(roff(Configuration.placeholder(key)))\\fR"
            if Configuration.repeatable.contains(key) { head += " (repeatable)" }
            lines += [".TP", head, roff(row.meaning)]
            if !["", "–", "-"].contains(row.defaultValue) { lines += [".br", "Default: \(roff(row.defaultValue))."] }
        }
        lines += [".SH EXAMPLE", ".nf",
                  "library = /srv/media",
                  "ads = /srv/ads/catalog",
                  "vo = gpu",
                  "ao = alsa",
                  "socket\\-group = adplayerd",
                  "display\\-hours = mon\\-fri 08:00\\-20:00, sat 10:00\\-18:00",
                  ".fi",
                  ".SH SEE ALSO", "\\fBadplayerd\\fR(8), \\fBadplayerctl\\fR(1)",
                  ".PP", roff("/usr/share/doc/adplayerd/configuration.md and adplayerd.conf.example")]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - adplayerctl(1)

    static var commands: [Command] { Commands.all.sorted { $0.commandLine.word < $1.commandLine.word } }

    static func adplayerctl() -> String {
        var lines = header("adplayerctl", 1, "control adplayerd through its control socket")
        lines += [".SH SYNOPSIS", ".B adplayerctl", "[\\fB\\-\\-socket\\fR \\fIPATH\\fR] [\\fB\\-\\-json\\fR] \\fICOMMAND\\fR [\\fIARGUMENTS\\fR...]",
                  ".SH DESCRIPTION",
                  roff("adplayerctl sends one command to adplayerd(8) and prints its reply (or, for `events`, the events as they come). "
                       + "Each command needs a tier: `read`, `control` or `admin`; the daemon's user and root have `admin`, the "
                       + "members of `socket-group` the tier of `socket-group-tier` (adplayerd.conf(5)). A relative path is taken from "
                       + "the working directory."),
                  ".SH OPTIONS",
                  ".TP", "\\fB\\-\\-socket\\fR \\fIPATH\\fR",
                  roff("the control socket (default: `$ADPLAYERD_SOCKET`, else the first that exists of "
                       + "`$XDG_RUNTIME_DIR/adplayerd/control.sock`, `/tmp/adplayerd-UID/control.sock` and "
                       + "`/run/adplayerd/control.sock`)."),
                  ".TP", "\\fB\\-\\-json\\fR", roff("the daemon's reply as it sent it, one JSON object a line."),
                  ".TP", "\\fB\\-\\-help\\fR, \\fB\\-h\\fR", roff("the list of commands."),
                  ".TP", "\\fB\\-\\-version\\fR", roff("this program's version (the daemon's: `adplayerctl version`)."),
                  ".SH COMMANDS"]
        for command in commands {
            let form = command.commandLine
            lines += [".TP", "\\fB" + roff(form.synopsis).replacingOccurrences(of: "-", with: "\\-") + "\\fR",
                      roff(form.help.replacingOccurrences(of: "\n", with: " ")) + " (tier: \(command.tier.name))"]
        }
        lines += [".SH EXIT STATUS", roff("0 done; 1 the daemon said no, or is not running; 2 bad usage. `health`: 0 ok, 1 degraded, 2 failing."),
                  ".SH EXAMPLES", ".nf", "adplayerctl open /srv/media/episode\\-1.mp4", "adplayerctl pause",
                  "adplayerctl \\-\\-json status", "adplayerctl events ad.started ad.ended", ".fi",
                  ".SH SEE ALSO", "\\fBadplayerd\\fR(8), \\fBadplayerd.conf\\fR(5)",
                  ".PP", roff("/usr/share/doc/adplayerd/protocol.md: the protocol, each command's arguments and replies.")]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - bash completion

    /// What completes a command's words: the lower-case choices of its synopsis (`on|off|auto`),
    /// files where it takes FILE or DIR, event names for `events`.
    static func completion(of form: CommandLineForm) -> (choices: [String], files: Bool) {
        if form.word == "events" { return (EventName.allCases.map(\.rawValue), false) }
        var choices: [String] = []
        var files = false
        for token in form.synopsis.split(separator: " ").dropFirst() where !token.hasPrefix("[--") && !token.hasPrefix("--") {
            let bare = token.trimmingCharacters(in: CharacterSet(charactersIn: "[].")).split(separator: "|").map(String.init)
            for word in bare {
                if ["FILE", "DIR", "PLAYLIST"].contains(word) { files = true }
                if !word.isEmpty, word != form.word, word.allSatisfy({ $0.isLowercase || $0 == "-" }), !choices.contains(word) { choices.append(word) }
            }
        }
        return (choices, files)
    }

    static func bashCompletion() -> String {
        let all = commands
        var cases: [String] = []
        for command in all {
            let form = command.commandLine
            let (choices, files) = completion(of: form)
            let options = form.options.keys.sorted().map { "--" + $0 }
            let valued = form.options.filter { $0.value == .value }.keys.sorted().map { "--" + $0 }
            var body = "      \(form.word))\n"
            body += "        opts=\"\((options + ["--json", "--socket", "--help"]).joined(separator: " "))\"\n"
            if !valued.isEmpty { body += "        valued=\"\(valued.joined(separator: " "))\"\n" }
            if !choices.isEmpty { body += "        words=\"\(choices.joined(separator: " "))\"\n" }
            if files { body += "        files=1\n" }
            cases.append(body + "        ;;")
        }
        return """
            # bash completion for adplayerctl(1): its commands, their words and options, and for a
            # command that takes a FILE or DIR the files of the library (the `library` folders of
            # $ADPLAYERD_CONFIG, /etc/adplayerd.conf and ~/.config/adplayerd/adplayerd.conf) beside
            # the working directory's. Made by `adplayerd manual adplayerctl.bash` from the command
            # table: do not edit.

            _adplayerctl_libraries() {
              local file
              for file in "${ADPLAYERD_CONFIG:-}" /etc/adplayerd.conf "${XDG_CONFIG_HOME:-$HOME/.config}/adplayerd/adplayerd.conf"; do
                [ -n "$file" ] && [ -r "$file" ] || continue
                sed -n 's/^[[:space:]]*library[[:space:]]*=[[:space:]]*"\\{0,1\\}\\([^"]*[^"[:space:]]\\)"\\{0,1\\}[[:space:]]*$/\\1/p' "$file"
              done
            }

            _adplayerctl() {
              local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
              local command="" i=1 word
              while [ "$i" -lt "$COMP_CWORD" ]; do
                word=${COMP_WORDS[i]}
                case "$word" in
                  --socket) i=$((i + 2)); continue ;;
                  -*) ;;
                  *) command=$word; break ;;
                esac
                i=$((i + 1))
              done
              COMPREPLY=()
              if [ "$prev" = "--socket" ]; then
                COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return 0
              fi
              if [ -z "$command" ]; then
                if [[ "$cur" == -* ]]; then
                  COMPREPLY=($(compgen -W "--socket --json --help --version" -- "$cur"))
                else
                  COMPREPLY=($(compgen -W "\(all.map(\.commandLine.word).joined(separator: " "))" -- "$cur"))
                fi
                return 0
              fi
              local opts="" valued="" words="" files=0
              case "$command" in
            \(cases.joined(separator: "\n"))
                *) return 0 ;;
              esac
              if [[ " $valued " == *" $prev "* ]]; then return 0; fi
              if [[ "$cur" == -* ]]; then
                COMPREPLY=($(compgen -W "$opts" -- "$cur")); return 0
              fi
              COMPREPLY=($(compgen -W "$words" -- "$cur"))
              if [ "$files" = 1 ]; then
                local folder more
                compopt -o filenames 2>/dev/null
                mapfile -t more < <(compgen -f -- "$cur"); COMPREPLY+=("${more[@]}")
                if [ -z "$cur" ]; then
                  while IFS= read -r folder; do
                    mapfile -t more < <(compgen -f -- "${folder%/}/"); COMPREPLY+=("${more[@]}")
                  done < <(_adplayerctl_libraries)
                fi
              fi
              return 0
            }
            complete -F _adplayerctl adplayerctl

            """
    }
}
