import Foundation

extension CacheEngine {
    /// Seconds until the egress budget of `url`'s origin resets, while it is spent (the proxy's
    /// `Retry-After` on its 503 for `CacheError.budgetSpent`); nil without a spent budget.
    public func egressRetryAfter(url: String) -> Int? {
        core.configuration.egressLedger?.retryAfter(url: url)
    }
}
