#ifndef CFUSE3_SHIM_H
#define CFUSE3_SHIM_H
// FUSE 3.12 API: low-level interface, fuse_loop_config objects.
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <fuse_lowlevel.h>

// Debian's fuse 3.14 headers make fuse_session_loop_mt a macro over versioned symbols, which
// Swift cannot call: this wrapper picks the right one at C compile time.
static inline int cfuse3_session_loop_mt(struct fuse_session *se, unsigned int max_idle_threads) {
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (cfg == NULL) return -1;
    fuse_loop_cfg_set_clone_fd(cfg, 0);
    fuse_loop_cfg_set_max_threads(cfg, 64);
    fuse_loop_cfg_set_idle_threads(cfg, max_idle_threads);
    int rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
    return rc;
}

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
#endif
