#ifndef CFUSE3_SHIM_H
#define CFUSE3_SHIM_H
// FUSE 3.12 API: low-level interface, fuse_loop_config objects.
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/xattr.h>   // for tests of the mount's extended attributes (getxattr and kin)
#include <unistd.h>
#include <spawn.h>

// Replies to a read with pieces of open files (fd-backed buffers, as passthrough_ll does) and of
// memory (an fd of -1: `mems[i]`): libfuse splices the file pieces into /dev/fuse where the kernel
// allows and writes the memory pieces into the same pipe, else reads it all into its own buffer.
// No copy passes through Swift. The bufvec has a flexible array of buffers, hence the shim.
static inline int cfuse3_reply_pieces(fuse_req_t req, const int *fds, const off_t *offsets,
                                      const void *const *mems, const size_t *sizes, size_t count) {
    if (count == 0) return fuse_reply_buf(req, NULL, 0);
    struct fuse_bufvec *v = (struct fuse_bufvec *)calloc(1, sizeof(struct fuse_bufvec) + (count - 1) * sizeof(struct fuse_buf));
    if (v == NULL) return fuse_reply_err(req, ENOMEM);
    v->count = count;
    for (size_t i = 0; i < count; i++) {
        v->buf[i].size = sizes[i];
        if (fds[i] < 0) {
            v->buf[i].flags = (enum fuse_buf_flags)0;
            v->buf[i].mem = (void *)mems[i];
        } else {
            v->buf[i].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
            v->buf[i].fd = fds[i];
            v->buf[i].pos = offsets[i];
        }
    }
    int rc = fuse_reply_data(req, v, FUSE_BUF_SPLICE_MOVE);
    free(v);
    return rc;
}

// Puts `size` bytes of `fd` at `pos` into the kernel's page cache of `ino` at `offset`
// (FUSE_NOTIFY_STORE; libfuse splices them where it can). The bytes must lie within the inode's
// size: the kernel would extend it.
static inline int cfuse3_notify_store_fd(struct fuse_session *se, fuse_ino_t ino, off_t offset, int fd, off_t pos, size_t size) {
    struct fuse_bufvec v = FUSE_BUFVEC_INIT(size);
    v.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    v.buf[0].fd = fd;
    v.buf[0].pos = pos;
    return fuse_lowlevel_notify_store(se, ino, offset, &v, FUSE_BUF_SPLICE_MOVE);
}

// FUSE passthrough (Linux 6.9+): the kernel reads an open file from a backing file of ours,
// without a round trip per read. Debian's libfuse 3.14 predates it, so the little of the
// protocol it needs is here: the INIT flag, the backing-file ioctls and the open reply.
// (Layouts from the kernel's uapi <linux/fuse.h>, protocol 7.40.)
#define CFUSE3_OPCODE_INIT 26
#define CFUSE3_INIT_EXT (1u << 30)
#define CFUSE3_PASSTHROUGH_FLAGS2 (1u << (37 - 32))
#define CFUSE3_FOPEN_PASSTHROUGH (1u << 7)
#define CFUSE3_FOPEN_NOFLUSH (1u << 5)
struct cfuse3_backing_map { int32_t fd; uint32_t flags; uint64_t padding; };
#define CFUSE3_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct cfuse3_backing_map)
#define CFUSE3_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

// The request's unique id if `buf` is an INIT request whose kernel offers passthrough, else 0.
static inline uint64_t cfuse3_init_offering_passthrough(const void *buf, size_t len) {
    // fuse_in_header (40 bytes: len, opcode, unique, ...), then fuse_init_in (major, minor,
    // max_readahead, flags, flags2, ...).
    if (buf == NULL || len < 40 + 20) return 0;
    const unsigned char *b = (const unsigned char *)buf;
    uint32_t opcode, flags, flags2;
    uint64_t unique;
    memcpy(&opcode, b + 4, 4);
    memcpy(&unique, b + 8, 8);
    memcpy(&flags, b + 40 + 12, 4);
    memcpy(&flags2, b + 40 + 16, 4);
    if (opcode != CFUSE3_OPCODE_INIT || !(flags & CFUSE3_INIT_EXT) || !(flags2 & CFUSE3_PASSTHROUGH_FLAGS2)) return 0;
    return unique;
}

// Writes a reply; if it answers request `init_unique` (an INIT), with passthrough added to the
// flags libfuse chose and a stack depth of 1 (backing files on a plain file system, and this
// mount may itself be stacked under overlayfs once). Returns what writev returns, and sets
// `*patched` when it added passthrough.
static inline ssize_t cfuse3_writev_reply(int fd, struct iovec *iov, int count, uint64_t init_unique, int *patched) {
    // fuse_out_header is 16 bytes (len, error, unique); fuse_init_out has flags at 12, flags2 at 32
    // and max_stack_depth at 36, in libfuse 3.14's 64 bytes as in the kernel's.
    if (init_unique != 0 && count == 2 && iov[0].iov_len == 16 && iov[1].iov_len >= 40 && iov[1].iov_len <= 256) {
        uint64_t unique;
        int32_t error;
        memcpy(&error, (const char *)iov[0].iov_base + 4, 4);
        memcpy(&unique, (const char *)iov[0].iov_base + 8, 8);
        uint32_t flags;
        memcpy(&flags, (const char *)iov[1].iov_base + 12, 4);
        if (unique == init_unique && error == 0 && (flags & CFUSE3_INIT_EXT)) {
            unsigned char out[256];
            memcpy(out, iov[1].iov_base, iov[1].iov_len);
            uint32_t flags2, depth = 1;
            memcpy(&flags2, out + 32, 4);
            flags2 |= CFUSE3_PASSTHROUGH_FLAGS2;
            memcpy(out + 32, &flags2, 4);
            memcpy(out + 36, &depth, 4);
            struct iovec v[2] = { iov[0], { out, iov[1].iov_len } };
            *patched = 1;
            return writev(fd, v, 2);
        }
    }
    return writev(fd, iov, count);
}

extern ssize_t splice(int fdin, __off64_t *offin, int fdout, __off64_t *offout, size_t len, unsigned int flags);

// libfuse's custom I/O needs a splice of its own to keep splicing fd-backed replies.
static inline ssize_t cfuse3_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                                         unsigned int flags, void *userdata) {
    (void)userdata;
    return splice(fdin, (__off64_t *)offin, fdout, (__off64_t *)offout, len, flags);
}

static inline ssize_t cfuse3_read(int fd, void *buf, size_t len, void *userdata) {
    (void)userdata;
    return read(fd, buf, len);
}

// Registers `fd` as a backing file: its id, or -errno (EPERM without CAP_SYS_ADMIN).
static inline int cfuse3_backing_open(int devfd, int fd) {
    struct cfuse3_backing_map m = { fd, 0, 0 };
    int id = ioctl(devfd, CFUSE3_DEV_IOC_BACKING_OPEN, &m);
    return id < 0 ? -errno : id;
}

static inline int cfuse3_backing_close(int devfd, int id) {
    uint32_t i = (uint32_t)id;
    return ioctl(devfd, CFUSE3_DEV_IOC_BACKING_CLOSE, &i) < 0 ? -errno : 0;
}

// Opens with passthrough: the kernel reads the file from backing file `backing_id` itself;
// no FLUSH at its close (`noflush`, as every open here: nothing is written).
static inline int cfuse3_reply_open_passthrough(fuse_req_t req, uint64_t fh, int32_t backing_id) {
    struct { uint64_t fh; uint32_t open_flags; int32_t backing_id; } out = { fh, CFUSE3_FOPEN_PASSTHROUGH | CFUSE3_FOPEN_NOFLUSH, backing_id };
    struct iovec iov = { &out, sizeof out };
    return fuse_reply_iov(req, &iov, 1);
}

// cachestat(2) (Linux 6.5): how many pages of [off, off + len) of `fd` are in the page cache.
// Returns that count, or -errno (ENOSYS before 6.5). Its number is 451 on every architecture;
// glibc 2.36 has no wrapper and the kernel headers of bookworm no struct, hence both here.
struct cfuse3_cachestat_range { uint64_t off; uint64_t len; };
struct cfuse3_cachestat { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; };
static inline int64_t cfuse3_cached_pages(int fd, uint64_t off, uint64_t len) {
    struct cfuse3_cachestat_range range = { off, len };
    struct cfuse3_cachestat cs;
    memset(&cs, 0, sizeof cs);
    return syscall(451, fd, &range, &cs, 0) < 0 ? -(int64_t)errno : (int64_t)cs.nr_cache;
}

// glibc 2.34+ has it, declared only under _GNU_SOURCE, which Swift's Glibc module is not built
// with: a spawn that closes every descriptor from `from` up in the child, whatever its
// close-on-exec flag (`ChangeCommand`).
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
static inline int cfuse3_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
#endif
