// `Seconds`, the one checker of seconds from outside, lives in its own module so that the
// control protocol can use it without the ads runtime; the runtime's users get it from here.
@_exported import Bounds
