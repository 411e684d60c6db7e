import CacheCore

extension CacheError {
    /// The one place where cache errors become HTTP statuses. The player gets a status it can
    /// act on (and a short text body saying why), never a dropped connection; the engine
    /// guarantees nothing from an origin error reaches the cache.
    public var httpStatus: Int {
        switch self {
        case .invalidURL: return 400
        case .notFound: return 404
        case .forbidden, .refusedAddress: return 403
        case .unreachable: return 502
        case .timeout: return 504
        // With `Retry-After` (`EgressLedger.retryAfter`): the budget resets then.
        case .budgetSpent: return 503
        case .rangeNotSatisfiable: return 416
        case .httpStatus, .badResponse, .storage, .diskFull, .locked, .remoteChanged, .cancelled: return 502
        }
    }
}
