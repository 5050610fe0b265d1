import AdTestSupport
import Bounds
import Foundation
import XCTest

/// The Debian package as a box installs it (issue 47): `make deb` built it before the tests
/// (the Makefile's `test` target), and this installs it on this machine with `dpkg -i`, checks
/// what it put where, upgrades it over an edited conffile, removes and purges it — and leaves
/// the machine as it found it (the package's users and groups removed again when the test made
/// them). Root only; refused on a machine where adplayerd is installed already (not ours to
/// disturb).
final class PackageTests: XCTestCase {
    static var package: URL {
        let arch = (try? runToEnd("/usr/bin/dpkg", ["--print-architecture"]).output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? "?"
        return repositoryRoot.appendingPathComponent("adplayerd_\(Product.version)_\(arch).deb")
    }

    func dpkg(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let result = try runToEnd("/usr/bin/dpkg", arguments, environment: ProcessInfo.processInfo.environment.merging(["DEBIAN_FRONTEND": "noninteractive"]) { $1 })
        XCTAssertEqual(result.status, 0, "dpkg \(arguments.joined(separator: " ")): \(result.output)", file: file, line: line)
        return result.output
    }

    func status() -> String {
        (try? runToEnd("/usr/bin/dpkg-query", ["-W", "-f=${Status} ${Version}", "adplayerd"]).output) ?? ""
    }

    /// Whether this machine's dpkg is told to leave `path` out (`path-exclude` in dpkg.cfg.d).
    static func excludedByDpkg(_ path: String) -> Bool {
        let folder = "/etc/dpkg/dpkg.cfg.d"
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        var excluded = false
        for file in files.sorted() {
            guard let text = try? String(contentsOfFile: folder + "/" + file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ", maxSplits: 1).map { String($0).trimmingCharacters(in: .whitespaces) }
                guard words.count == 2, fnmatch(words[1], path, 0) == 0 else { continue }
                if words[0] == "path-exclude" { excluded = true }
                if words[0] == "path-include" { excluded = false }
            }
        }
        return excluded
    }

    func testThePackageInstallsUpgradesOverAnEditedConffileAndRemovesCleanly() throws {
        guard getuid() == 0 else { throw XCTSkip("dpkg -i needs root") }
        let package = Self.package
        XCTAssertTrue(FileManager.default.fileExists(atPath: package.path), "\(package.path): run `make deb` first (make test does)")
        guard FileManager.default.fileExists(atPath: package.path) else { return }
        guard !status().contains("installed") else { throw XCTSkip("adplayerd is installed on this machine: not ours to remove") }
        let users = ["adplayerd", "adplayerd-web", "adplayerd-mqtt"]
        let usersBefore = try users.filter { try runToEnd("/usr/bin/getent", ["passwd", $0]).status == 0 }
        let groupsBefore = try users.filter { try runToEnd("/usr/bin/getent", ["group", $0]).status == 0 }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("package-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: scratch)
            _ = try? runToEnd("/usr/bin/dpkg", ["--purge", "adplayerd"])
            for user in users.reversed() where !usersBefore.contains(user) { _ = try? runToEnd("/usr/sbin/userdel", [user]) }
            for group in users where !groupsBefore.contains(group) {
                if (try? runToEnd("/usr/bin/getent", ["group", group]).status) == 0 { _ = try? runToEnd("/usr/sbin/groupdel", [group]) }
            }
        }

        // The package as lintian reads it: no error.
        let lint = try runToEnd("/usr/bin/lintian", ["--tag-display-limit", "0", package.path])
        XCTAssertFalse(lint.output.split(separator: "\n").contains { $0.hasPrefix("E: ") }, lint.output)
        // Small enough to roll out over a cellular link (issue 47, 5): the package ≤ 30 MB,
        // adplayerctl ≤ 10 MB as installed.
        let size = (try FileManager.default.attributesOfItem(atPath: package.path)[.size] as? NSNumber)?.intValue ?? .max
        XCTAssertLessThanOrEqual(size, 30_000_000, "the package is \(size) bytes")
        // Its dependencies were computed from the binaries, not listed by hand.
        let fields = try dpkg(["--field", package.path, "Depends", "Version"])
        XCTAssertTrue(fields.contains("libmpv2") && fields.contains("libsqlite3-0") && fields.contains("libc6 (>="), fields)
        XCTAssertTrue(fields.contains("Version: \(Product.version)"), fields)

        // Installed: the programs, units, man pages, completion, docs; the user and its folders.
        let listing = try runToEnd("/usr/bin/dpkg-deb", ["-c", package.path]).output
        _ = try dpkg(["-i", package.path])
        XCTAssertTrue(status().hasPrefix("install ok installed \(Product.version)"), status())
        for path in ["/usr/bin/adplayerd", "/usr/bin/adplayerctl", "/usr/bin/adplayerd-web", "/usr/bin/adplayerd-mqtt",
                     "/lib/systemd/system/adplayerd.service", "/lib/systemd/system/adplayerd-web.socket", "/usr/lib/systemd/user/adplayerd.service",
                     "/usr/lib/sysusers.d/adplayerd.conf", "/usr/lib/tmpfiles.d/adplayerd.conf", "/etc/adplayerd.conf",
                     "/usr/share/man/man8/adplayerd.8.gz", "/usr/share/man/man5/adplayerd.conf.5.gz", "/usr/share/man/man1/adplayerctl.1.gz",
                     "/usr/share/bash-completion/completions/adplayerctl", "/usr/share/doc/adplayerd/README.md", "/usr/share/doc/adplayerd/copyright"] {
            // A machine whose dpkg leaves out documentation (`path-exclude`, as slim images do)
            // gets it in the package, not on its disk.
            if Self.excludedByDpkg(path) {
                XCTAssertTrue(listing.contains("." + path), "\(path) not in the package")
            } else {
                XCTAssertTrue(FileManager.default.fileExists(atPath: path), "\(path) not installed")
            }
        }
        XCTAssertEqual(try dpkg(["-L", "adplayerd"]).split(separator: "\n").filter { $0.hasPrefix("/usr/local") }, [])
        let control = (try FileManager.default.attributesOfItem(atPath: "/usr/bin/adplayerctl")[.size] as? NSNumber)?.intValue ?? .max
        XCTAssertLessThanOrEqual(control, 10_000_000, "adplayerctl is \(control) bytes")
        let unit = try String(contentsOfFile: "/lib/systemd/system/adplayerd.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("ExecStart=/usr/bin/adplayerd --config /etc/adplayerd.conf"), unit)
        XCTAssertTrue(try String(contentsOfFile: "/var/lib/dpkg/info/adplayerd.conffiles", encoding: .utf8).contains("/etc/adplayerd.conf"))
        let passwd = try runToEnd("/usr/bin/getent", ["passwd", "adplayerd"])
        XCTAssertEqual(passwd.status, 0, "no user adplayerd")
        XCTAssertTrue(passwd.output.contains(":/var/lib/adplayerd:/usr/sbin/nologin"), passwd.output)
        // The page's and the bridge's users reach the daemon's socket through its group.
        for user in ["adplayerd-web", "adplayerd-mqtt"] {
            XCTAssertTrue(try runToEnd("/usr/bin/id", ["-nG", user]).output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .contains("adplayerd"), "\(user) is not in the group adplayerd")
        }
        let owner = try FileManager.default.attributesOfItem(atPath: "/var/lib/adplayerd")
        XCTAssertEqual(owner[.ownerAccountName] as? String, "adplayerd")
        XCTAssertEqual((owner[.posixPermissions] as? NSNumber)?.intValue, 0o750)
        // Nothing started or enabled by installing it.
        let wants = (try? FileManager.default.subpathsOfDirectory(atPath: "/etc/systemd/system")) ?? []
        XCTAssertEqual(wants.filter { $0.contains("adplayerd") }, [], "a unit was enabled by the install")
        XCTAssertEqual(try runToEnd("/usr/bin/pgrep", ["-x", "adplayerd"]).status, 1, "adplayerd runs after an install")
        // The installed programs run: their version, the units as systemd reads them, the man pages.
        XCTAssertEqual(try runToEnd("/usr/bin/adplayerd", ["--version"]).output, "adplayerd \(Product.version)\n")
        XCTAssertEqual(try runToEnd("/usr/bin/adplayerctl", ["--version"]).output, "adplayerctl \(Product.version)\n")
        let verify = try runToEnd("/usr/bin/systemd-analyze", ["verify", "/lib/systemd/system/adplayerd.service", "/lib/systemd/system/adplayerd-web.socket",
                                                                "/lib/systemd/system/adplayerd-web.service", "/lib/systemd/system/adplayerd-mqtt.service"])
        XCTAssertEqual(verify.status, 0, verify.output)
        if !Self.excludedByDpkg("/usr/share/man/man8/adplayerd.8.gz") {
            let manual = try runToEnd("/usr/bin/man", ["-w", "adplayerd", "adplayerctl", "adplayerd.conf"])
            XCTAssertEqual(manual.status, 0, manual.output)
        }

        // The operator edits the conffile: a library of theirs; the check passes on it.
        let library = scratch.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: scratch.path)
        let edit = "# the operator's\nlibrary = \(library.path)\nlog-level = info\n"
        try edit.write(toFile: "/etc/adplayerd.conf", atomically: false, encoding: .utf8)
        let check = try runToEnd("/usr/bin/adplayerd", ["check-config", "--config", "/etc/adplayerd.conf"])
        XCTAssertEqual(check.status, 0, check.output)
        // A ledger of plays in the state folder: removal must keep it.
        let ledger = "/var/lib/adplayerd/adplayerd.sqlite"
        XCTAssertTrue(FileManager.default.createFile(atPath: ledger, contents: Data("kept".utf8)))

        // An upgrade (the same package as a later version) keeps the edit without asking.
        let unpacked = scratch.appendingPathComponent("unpacked").path
        _ = try dpkg(["-x", package.path, unpacked])
        _ = try dpkg(["-e", package.path, unpacked + "/DEBIAN"])
        let controlFile = unpacked + "/DEBIAN/control"
        let later = Product.version + "+1"
        try (try String(contentsOfFile: controlFile, encoding: .utf8)).replacingOccurrences(of: "Version: \(Product.version)\n", with: "Version: \(later)\n")
            .write(toFile: controlFile, atomically: true, encoding: .utf8)
        let upgrade = scratch.appendingPathComponent("adplayerd-later.deb").path
        let built = try runToEnd("/usr/bin/dpkg-deb", ["--root-owner-group", "--build", unpacked, upgrade])
        XCTAssertEqual(built.status, 0, built.output)
        let upgraded = try dpkg(["-i", upgrade])
        XCTAssertFalse(upgraded.contains("Configuration file '/etc/adplayerd.conf'"), "dpkg asked about the conffile: \(upgraded)")
        XCTAssertTrue(status().hasPrefix("install ok installed \(later)"), status())
        XCTAssertEqual(try String(contentsOfFile: "/etc/adplayerd.conf", encoding: .utf8), edit, "the operator's edit is gone after the upgrade")
        XCTAssertEqual(try runToEnd("/usr/bin/adplayerd", ["check-config", "--config", "/etc/adplayerd.conf"]).status, 0)

        // Removed: the programs go; the configuration, the state folder and its ledger stay.
        _ = try dpkg(["--remove", "adplayerd"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/usr/bin/adplayerd"))
        XCTAssertTrue(status().hasPrefix("deinstall ok config-files"), status())
        XCTAssertTrue(FileManager.default.fileExists(atPath: "/etc/adplayerd.conf"))
        XCTAssertEqual(FileManager.default.contents(atPath: ledger), Data("kept".utf8), "removal lost the ledger")

        // Purged: the configuration and the state go too.
        _ = try dpkg(["--purge", "adplayerd"])
        XCTAssertFalse(status().contains("installed"), status())
        for path in ["/etc/adplayerd.conf", "/var/lib/adplayerd", "/var/lib/adplayerd-mqtt", "/var/cache/adplayerd"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(path) left after a purge")
        }
    }
}
