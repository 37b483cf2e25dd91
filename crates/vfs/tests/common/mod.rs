//! Helpers shared by the integration tests.

use vfscale::config::{DirLocking, InodeListKind, NegativeDentries, WalkMode};
use vfscale::VfsConfig;

/// Every combination of the four VFS design variants.
pub fn all_configs() -> Vec<VfsConfig> {
    let mut out = Vec::new();
    for walk in [WalkMode::Rcu, WalkMode::RefOnly] {
        for dir_locking in [DirLocking::Split, DirLocking::RwSem, DirLocking::GlobalMutex] {
            for negative_dentries in [NegativeDentries::Cached, NegativeDentries::Uncached] {
                for inode_list in [InodeListKind::PerCpu, InodeListKind::Global] {
                    out.push(VfsConfig { walk, dir_locking, negative_dentries, inode_list, ..VfsConfig::default() });
                }
            }
        }
    }
    out
}
