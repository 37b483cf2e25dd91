//! tmpfs's `size=` and `nr_inodes=` option syntax, for `vfscale mount
//! --size` and `--inodes`: a number with an optional binary suffix (`k`,
//! `m`, `g`, `t`, `p`, `e`, either case, as the kernel's `memparse`), and
//! for a size also a percentage of RAM (`50%`). 0 means no limit. The
//! defaults are tmpfs's: half of RAM, and as many inodes as half of RAM has
//! pages.
//!
//! ```
//! use vfscale_fuse::capacity::{parse_count, parse_size};
//!
//! assert_eq!(parse_size("8M"), Ok(8 << 20));
//! assert_eq!(parse_size("1g"), Ok(1 << 30));
//! assert_eq!(parse_count("1k"), Ok(1024));
//! assert!(parse_size("100%").unwrap() > 0);
//! assert!(parse_size("8 MB").is_err());
//! ```

const PAGE_SIZE: u64 = 4096;

/// A count with an optional `memparse` suffix.
pub fn parse_count(arg: &str) -> Result<u64, String> {
    let digits = arg.find(|c: char| !c.is_ascii_digit()).unwrap_or(arg.len());
    let (number, suffix) = arg.split_at(digits);
    let number: u64 = number.parse().map_err(|_| format!("{arg:?} is not a number with an optional K/M/G suffix"))?;
    let shift = match suffix {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => return Err(format!("{arg:?}: unknown suffix {suffix:?} (use K, M, G, T, P or E)")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("{arg:?} is too large"))
}

/// A size in bytes: a count with a suffix, or `N%` of RAM (rounded down
/// to pages, as tmpfs does).
pub fn parse_size(arg: &str) -> Result<u64, String> {
    match arg.strip_suffix('%') {
        Some(percent) => {
            let percent: u64 = percent.parse().map_err(|_| format!("{arg:?} is not a percentage of RAM"))?;
            let pages = ram_pages().checked_mul(percent).ok_or_else(|| format!("{arg:?} is too large"))? / 100;
            Ok(pages * PAGE_SIZE)
        }
        None => parse_count(arg),
    }
}

/// tmpfs's default `nr_inodes`: the pages in half of RAM.
pub fn default_inodes() -> u64 {
    ram_pages() / 2
}

/// Pages of RAM (`totalram_pages`).
fn ram_pages() -> u64 {
    // SAFETY: sysinfo fills the struct we own; zeroes are a valid start.
    let info = unsafe {
        let mut info: libc::sysinfo = std::mem::zeroed();
        if libc::sysinfo(&mut info) != 0 {
            return 0;
        }
        info
    };
    (info.totalram as u64).saturating_mul(u64::from(info.mem_unit)) / PAGE_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_and_errors() {
        assert_eq!(parse_count("0"), Ok(0));
        assert_eq!(parse_count("1000"), Ok(1000));
        assert_eq!(parse_size("16k"), Ok(16384));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("8MB").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999E").is_err());
        assert!(parse_size("x%").is_err());
    }

    #[test]
    fn percentages_are_of_ram() {
        let all = parse_size("100%").unwrap();
        assert!(all > 0 && all % PAGE_SIZE == 0);
        let half = parse_size("50%").unwrap();
        assert!(half.abs_diff(all / 2) <= PAGE_SIZE);
        assert_eq!(default_inodes(), half / PAGE_SIZE);
    }
}
