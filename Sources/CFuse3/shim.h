#ifndef CFUSE3_SHIM_H
#define CFUSE3_SHIM_H
// FUSE 3.12 API: low-level interface, fuse_loop_config objects.
#define FUSE_USE_VERSION 312
#include <stddef.h>
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
#endif
