import CacheCore
import CFuse3
