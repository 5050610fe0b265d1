import Foundation

/// The executables of the build under test: the folder the test bundle runs from, which
/// `swift build --build-tests` fills for every build — `.build/debug`, and the sanitized
/// builds of `make tsan` (`.build/tsan/…`) and `make asan` (`.build/asan/…`). Never a
/// hard-coded `.build/debug`: under a sanitizer that would run the plain (or a stale) build.
public enum Executables {
    public static let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    public static var adplayerd: String { path("adplayerd") }
    public static var adplayerctl: String { path("adplayerctl") }
    /// The developer's tools (`play`, `bench-*`, `off-loop`).
    public static var adplayerdDev: String { path("adplayerd-dev") }

    /// `name` in the build folder; a failing test says so when it is not there.
    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}
