import CacheCore
import NIOCore
