import Glibc

/// Who may pin and unpin files of a mount (`setfattr -n user.httpcachefs.pin`, `setfattr -x`):
/// the mount's owner, the user who runs the daemon, and root. Nobody else, whatever the kernel
/// let through.
///
/// Why the daemon decides: the kernel's check (`default_permissions`: write permission on the
/// file) is passed by anyone with CAP_DAC_OVERRIDE over the file's owner, and an unprivileged
/// user namespace (`unshare -r`) gives that to the user the files are shown as owned by. With
/// `-o uid=U` (a root daemon serving a media server's user) U could pin and unpin root's cache
/// that way. The request's uid is the caller's as the mount's namespace sees it (the kernel maps
/// it out of any namespace the caller made), so it cannot be forged from one.
///
/// The owner is the daemon's user, not `-o uid=` (which only says whom files are shown as
/// owned by): pins hold the daemon's cache, and cost its space.
enum PinPermission: Equatable {
    case allowed
    /// EPERM: not the caller's to change (as for an attribute of another user's file).
    case refused

    static func decide(requestUID: uid_t, mountOwner: uid_t) -> PinPermission {
        requestUID == 0 || requestUID == mountOwner ? .allowed : .refused
    }
}
