import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import AdRuntime

/// Fetches bytes over http(s) with a deadline and a size limit.
public protocol BoundedFetcher: Sendable {
    /// Sends `request` (http(s) only) and returns a 2xx answer's body; `timeout` bounds the
    /// whole exchange, `maxBytes` the body.
    func send(_ request: URLRequest, timeout: Double, maxBytes: Int) async throws -> Data
}

extension BoundedFetcher {
    public func fetch(_ url: URL, timeout: Double, maxBytes: Int) async throws -> Data {
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = "GET"
        return try await send(request, timeout: timeout, maxBytes: maxBytes)
    }
}

public struct FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case timeout, tooLarge, http(Int), network, notHTTP }
    public let kind: Kind
    public let url: String
    public var description: String {
        switch kind {
        case .timeout: "\(url): no answer in time"
        case .tooLarge: "\(url): the response is larger than allowed"
        case .http(let status): "\(url): HTTP \(status)"
        case .network: "\(url): network error"
        case .notHTTP: "\(url): only http(s) URLs are fetched"
        }
    }
}

/// URLSession with a per-request deadline, and a byte limit enforced as data arrives (a 20 MB
/// answer is cut off at the limit, not downloaded).
public final class HTTPFetcher: NSObject, BoundedFetcher, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: the per-task state is only touched under `tasks`' lock; the session is thread-safe.
    private struct Pending {
        var data = Data()
        let maxBytes: Int
        let continuation: CheckedContinuation<Data, any Error>
        let url: String
    }

    private let tasks = Locked<[Int: Pending]>([:])
    private var session: URLSession!

    public override init() {
        super.init()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    public func send(_ request: URLRequest, timeout: Double, maxBytes: Int) async throws -> Data {
        guard let url = request.url, ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            throw FetchError(kind: .notHTTP, url: request.url?.absoluteString ?? "")
        }
        var request = request
        request.timeoutInterval = timeout
        return try await withCheckedThrowingContinuation { continuation in
            let task = session.dataTask(with: request)
            tasks.withLock { $0[task.taskIdentifier] = Pending(maxBytes: maxBytes, continuation: continuation, url: url.absoluteString) }
            // The request's own timeout is per idle interval; this one is the whole answer's.
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self, weak task] in
                guard let task, let pending = self?.finish(task.taskIdentifier) else { return }
                task.cancel()
                pending.continuation.resume(throwing: FetchError(kind: .timeout, url: pending.url))
            }
            task.resume()
        }
    }

    private func finish(_ id: Int) -> Pending? { tasks.withLock { $0.removeValue(forKey: id) } }

    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                           completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let length = response.expectedContentLength
        let limit = tasks.withLock { $0[dataTask.taskIdentifier]?.maxBytes } ?? 0
        if !(200..<300).contains(status) || (length > 0 && length > Int64(limit)) {
            completionHandler(.cancel)
            if let pending = finish(dataTask.taskIdentifier) {
                pending.continuation.resume(throwing: FetchError(kind: (200..<300).contains(status) ? .tooLarge : .http(status), url: pending.url))
            }
            return
        }
        completionHandler(.allow)
    }

    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let overflow = tasks.withLock { tasks -> Pending? in
            guard var pending = tasks[dataTask.taskIdentifier] else { return nil }
            pending.data.append(data)
            if pending.data.count > pending.maxBytes { return tasks.removeValue(forKey: dataTask.taskIdentifier) }
            tasks[dataTask.taskIdentifier] = pending
            return nil
        }
        if let overflow {
            dataTask.cancel()
            overflow.continuation.resume(throwing: FetchError(kind: .tooLarge, url: overflow.url))
        }
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let pending = finish(task.taskIdentifier) else { return }
        if let error {
            pending.continuation.resume(throwing: (error as? URLError)?.code == .timedOut ? FetchError(kind: .timeout, url: pending.url)
                                                                                         : FetchError(kind: .network, url: pending.url))
        } else {
            pending.continuation.resume(returning: pending.data)
        }
    }
}

