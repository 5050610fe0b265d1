import AdRuntime

/// Runs async work from synchronous command-line code (never on the player's loop).
public enum Blocking {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
        let done = Handover<Unchecked<Result<T, any Error>>>()
        Task {
            do { done.fulfil(Unchecked(.success(try await body()))) } catch { done.fulfil(Unchecked(.failure(error))) }
        }
        return done.wait()!.value
    }
}
