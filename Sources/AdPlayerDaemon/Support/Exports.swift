// The log, the signals and the configuration file's reader are the daemon's as much as its
// clients': the daemon's users get them from here.
@_exported import ClientSupport
@_exported import ProcessSupport
