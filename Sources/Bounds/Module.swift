// Bounds: what every module stands on. The part that needs no Foundation — seconds, times,
// text, addresses, locks and threads, CSV, the version — is BoundsCore, which the protocol and
// `adplayerctl` link alone (no Foundation at all: issue 47, 5); this module adds the files
// (`SafeFile`, `AtomicFile`), a box's environment (`AdEnvironment`) and its `Workers`, and re-exports the
// core, so that `import Bounds` is all a module writes.
@_exported import BoundsCore
