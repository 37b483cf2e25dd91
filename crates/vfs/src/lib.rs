//! The vfscale VFS core (in progress).
