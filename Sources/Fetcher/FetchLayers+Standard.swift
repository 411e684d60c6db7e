import CacheCore
import Foundation

extension FetchLayers {
    /// The layers every engine over a real source runs on (`CacheEngine.init(layers:)`), from the
    /// outside in: a `FetchTracker` that counts each transfer into the engine's metrics (answers
    /// by class, body bytes, retries) and lists those running for the status page, around an
    /// `OriginHealthSource` (offline mode: an origin that cannot be reached fails its requests at
    /// once and is probed until it answers), around the source. The tracker is outside, so a
    /// request failed at once for an origin that is down is counted too.
    /// - Parameter probes: where the health layer's probe timers run: the engine clock's
    ///   scheduler, or one a test gives (a manual one).
    public static func standard(probes: Scheduler? = nil) -> (RangeSource, FetchLayerContext) -> FetchLayers {
        { source, engine in
            let health = OriginHealthSource(source, logger: engine.logger, now: engine.clock, scheduler: probes ?? engine.scheduler)
            let tracker = FetchTracker(health, metrics: engine.metrics, clock: engine.clock)
            return FetchLayers(source: tracker, transfers: tracker, originHealth: health)
        }
    }
}
