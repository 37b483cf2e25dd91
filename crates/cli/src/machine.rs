//! Facts about the machine a run measured, saved with every reproduction so
//! two JSON files from different machines or builds can be told apart.

use serde::{Deserialize, Serialize};
use std::ffi::CStr;
use vfscale_sync::cpu::usable_cpus;

/// Kernel, CPU count and CPU model of this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -s -r`, e.g. "Linux 6.8.0".
    pub kernel: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// The first "model name" of /proc/cpuinfo, or "unknown".
    pub cpu_model: String,
    /// `uname -m`.
    pub arch: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        // SAFETY: uname fills the zeroed struct we own; its fields are then
        // NUL-terminated strings.
        let (sysname, release, machine) = unsafe {
            let mut u: libc::utsname = std::mem::zeroed();
            libc::uname(&mut u);
            let field = |f: &[libc::c_char]| CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
            (field(&u.sysname), field(&u.release), field(&u.machine))
        };
        Machine { kernel: format!("{sysname} {release}"), cpus: usable_cpus(), cpu_model: cpu_model(), arch: machine }
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_facts() {
        let m = Machine::this();
        assert!(m.kernel.starts_with("Linux "), "{m:?}");
        assert!(m.cpus >= 1);
        assert!(!m.cpu_model.is_empty() && !m.arch.is_empty());
        let json = serde_json::to_value(&m).unwrap();
        for key in ["kernel", "cpus", "cpu_model", "arch"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
    }
}
