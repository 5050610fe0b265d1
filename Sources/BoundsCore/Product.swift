#if canImport(Glibc)
import Glibc
#endif
/// The product's version: every process says it alike (the User-Agent, `status`, the page, the
/// bridge's online message).
public enum Product {
    public static let version = "1.1.0"
}
