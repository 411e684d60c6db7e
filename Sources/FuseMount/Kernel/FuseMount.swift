// FuseMount: remote HTTP(S) files as a read-only libfuse3 low-level file system over CacheCore.
//
// Layers, from the kernel up:
//   FuseSession      owns the libfuse session: mount, a poll()-driven request loop on one thread,
//                    a reply gate so late engine completions never touch a destroyed session, and
//                    kernel cache invalidations (notify_inval_*), sent from their own queue.
//   FuseOperations   the C op table: @convention(c) functions that translate arguments and replies
//                    and call FileSystemCore. No logic, no errno choices.
//   FileSystemCore   the file system itself in plain Swift: the inode table, file handles,
//                    directory listings with their TTL, by-URL resolution, revalidation. Every
//                    operation answers through a completion, so nothing waits on the network while
//                    holding a thread. Testable without FUSE.
//   MountBackend     what the core needs from the cache (open, reader, usage, change events);
//                    `EngineBackend` adapts CacheEngine, tests plug in a fake.
// Pure parts: EntrySpec (URL / NAME=URL arguments), URLListParser, MountTreeSpec (clash checks),
// DirectoryListing (nginx / Apache HTML and nginx JSON autoindex), InodeTable, ByURLPath.
// errno is chosen in one place: CacheError+Errno.swift.
