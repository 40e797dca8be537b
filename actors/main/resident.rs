//! Keeps the daemon's resident memory to what it uses: the allocator gives freed pages back
//! soon ([`tune_allocator`]), and the pages of the executable that only the start needed are
//! given back once it serves ([`release_start_pages`]).
//!
//! A start runs code spread over the whole of the binary's `.text` (configuration, every
//! agent's tools, the store's recovery, the channels), and every page fault on a file-backed
//! mapping maps up to 64 KiB around it (the kernel's fault-around): an idle daemon kept about
//! 18 MiB of its 33 MB of code resident although it runs a few hundred KiB of it while idle.
//! [`release_start_pages`] unmaps, once the daemon serves, every page of the executable's own
//! mappings that is still the file's (never written, so the kernel re-reads it from the page
//! cache on the next use): what stays resident afterwards is the code and data the daemon runs.
//!
//! The shared libraries' mappings are treated alike (libc's code is mapped whole around the
//! little of it an idle daemon runs, as the executable's is).
//!
//! Only read-only mappings of this executable (or of a shared library) whose pages are all the file's
//! (`Anonymous: 0 kB` in `/proc/self/smaps`) are touched. A mapping the loader wrote
//! (relocated read-only data, `.data`, `.bss`) holds private copies whose loss would change the
//! program, so it is left alone; a read-only mapping cannot gain such copies later.

use std::io;

/// mimalloc's `mi_option_purge_delay`: its place in the `mi_option_e` enum of the mimalloc 3
/// sources that `libmimalloc-sys` 0.1.49 builds (pinned in Cargo.toml), which the Rust binding
/// has no constant for.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's `mi_option_generic_collect`, likewise (no constant in the binding either).
const MI_OPTION_GENERIC_COLLECT: libmimalloc_sys::mi_option_t = 34;

/// How many of a thread's slow-path allocations pass between two collections of its heap
/// (its delayed frees, its empty and retired pages), at least: mimalloc 3 waits 10,000 and
/// counts in steps of 1,000, so 1,000 is a collection at each step. Under sustained load the
/// daemon then held 2–5 MiB less at 30,000 tasks and grew less over the last 10,000 of them,
/// for no instruction a turn that callgrind can tell (BENCHMARKS.md, "Memory under load
/// follows the sessions' histories").
pub const GENERIC_COLLECT: i64 = 1000;

/// How long mimalloc keeps a freed page before giving it back to the system, in milliseconds.
/// mimalloc 3 waits 1,000 ms: under sustained load the daemon then held 12–20 % more than with
/// glibc's malloc (10k to 30k tasks). With 10 ms (mimalloc 2's default) it stays within glibc's
/// run-to-run spread, for about 1 % more instructions per turn (BENCHMARKS.md, "The allocator
/// and the start's pages").
pub const PURGE_DELAY_MS: i64 = 10;

/// Sets the allocator's options. Call it first in `main`, before any other thread starts
/// (mimalloc's option setter is not thread-safe).
pub fn tune_allocator() {
    set_option(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    set_option(MI_OPTION_GENERIC_COLLECT, GENERIC_COLLECT);
}

#[allow(unsafe_code)]
fn set_option(option: libmimalloc_sys::mi_option_t, value: i64) {
    // SAFETY: `mi_option_set` takes two integers and no pointer; it is called from `main` before
    // any thread is started (its one requirement), or from a test that reads the option back.
    unsafe { libmimalloc_sys::mi_option_set(option, value as std::ffi::c_long) }
}

/// The allocator's option `option` in force.
#[cfg(test)]
#[allow(unsafe_code)]
fn option(option: libmimalloc_sys::mi_option_t) -> i64 {
    // SAFETY: `mi_option_get` takes an integer and reads a global; no pointer is involved.
    let value: std::ffi::c_long = unsafe { libmimalloc_sys::mi_option_get(option) };
    value as i64
}

/// One mapping of an executable, as `/proc/PID/smaps` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExeMapping {
    /// Its first address.
    pub start: usize,
    /// The address after its last byte.
    pub end: usize,
    /// Its permissions, such as `r-xp`.
    pub perms: String,
    /// Its resident KiB (`Rss:`), when the entry gives it.
    pub rss_kib: Option<u64>,
    /// Its KiB of private copies (`Anonymous:`), when the entry gives it.
    pub anonymous_kib: Option<u64>,
}

impl ExeMapping {
    /// Read-only (`r--p` or `r-xp`), private, and holding no page of its own: every page is the
    /// file's, so it can be dropped and read again unchanged.
    fn releasable(&self) -> bool {
        matches!(self.perms.as_bytes(), [b'r', b'-', _, b'p']) && self.anonymous_kib == Some(0)
    }
}

/// The mappings of the file `exe` in `smaps` (the text of `/proc/PID/smaps`), in order.
pub fn exe_mappings(smaps: &str, exe: &str) -> Vec<ExeMapping> {
    mappings_where(smaps, |path| path == exe)
}

/// The mappings of shared libraries (`….so`, `….so.N`) in `smaps`, in order: libc's and libm's
/// code, which the idle daemon runs a little of, is mapped whole around each page it ran too.
pub fn library_mappings(smaps: &str) -> Vec<ExeMapping> {
    mappings_where(smaps, |path| {
        let name = path.rsplit('/').next().unwrap_or(path);
        path.starts_with('/') && (name.ends_with(".so") || name.contains(".so."))
    })
}

/// The mappings in `smaps` of the files whose path `wanted` takes, in order.
fn mappings_where(smaps: &str, wanted: impl Fn(&str) -> bool) -> Vec<ExeMapping> {
    let mut found: Vec<ExeMapping> = Vec::new();
    // Whether the entry being read is a wanted one (its fields then go to the last found).
    let mut ours = false;
    for line in smaps.lines() {
        if let Some((start, end, perms, path)) = header(line) {
            ours = wanted(path);
            if ours {
                found.push(ExeMapping {
                    start,
                    end,
                    perms: perms.to_string(),
                    rss_kib: None,
                    anonymous_kib: None,
                });
            }
        } else if let Some(mapping) = found.last_mut().filter(|_| ours) {
            if let Some(kib) = field_kib(line, "Rss:") {
                mapping.rss_kib = Some(kib);
            } else if let Some(kib) = field_kib(line, "Anonymous:") {
                mapping.anonymous_kib = Some(kib);
            }
        }
    }
    found
}

/// What [`release_start_pages`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Mappings released.
    pub mappings: usize,
    /// Their resident size before, in KiB.
    pub resident_kib: u64,
}

/// Unmaps the executable's and its shared libraries' clean, read-only pages (their code and
/// constant data) so that only what runs afterwards is faulted back in, from the page cache.
/// Linux only; elsewhere it does nothing. Answers what it released.
pub fn release_start_pages() -> io::Result<Released> {
    if !cfg!(target_os = "linux") {
        return Ok(Released::default());
    }
    let exe = std::fs::read_link("/proc/self/exe")?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = Released::default();
    let mappings = exe_mappings(&smaps, &exe.to_string_lossy())
        .into_iter()
        .chain(library_mappings(&smaps));
    for mapping in mappings {
        if mapping.releasable() {
            advise_dontneed(&mapping)?;
            released.mappings += 1;
            released.resident_kib += mapping.rss_kib.unwrap_or(0);
        }
    }
    Ok(released)
}

/// When to give the executable's pages back again: once per idle stretch. Code a burst of work
/// ran (a turn's, the first sweeps after the start) stays resident after the work ends; the
/// first look that finds a quiet stretch after work says to release it, later quiet looks do
/// not (what the idle timers fault back in is what idling needs), and work makes the next quiet
/// stretch release again.
#[derive(Debug)]
pub struct IdleRelease {
    /// The CPU ticks at the last look.
    last: Option<u64>,
    /// Whether there was work since the last release.
    worked: bool,
    /// The most ticks a quiet stretch uses.
    quiet_ticks: u64,
}

impl IdleRelease {
    /// Starts at `ticks` ([`cpu_ticks`]) with work behind it (the start); a stretch using fewer
    /// than `quiet_ticks` counts as quiet.
    pub fn new(ticks: Option<u64>, quiet_ticks: u64) -> Self {
        Self {
            last: ticks,
            worked: true,
            quiet_ticks,
        }
    }

    /// Takes a look at `ticks`; true: release now.
    pub fn look(&mut self, ticks: Option<u64>) -> bool {
        let quiet = matches!((self.last, ticks), (Some(a), Some(b)) if b.saturating_sub(a) < self.quiet_ticks);
        self.last = ticks;
        if !quiet {
            self.worked = true;
            return false;
        }
        std::mem::replace(&mut self.worked, false)
    }
}

/// The CPU time this process has used, user and system, in clock ticks (`utime + stime` of
/// `/proc/self/stat`): how an idle stretch is told from work without touching the daemon's
/// parts. `None` where there is no such file.
pub fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_ticks_of(&stat)
}

/// `utime + stime` of a `/proc/PID/stat` line. The command name (field 2, in parentheses) may
/// hold spaces and parentheses: the fields are counted after its last `)`.
fn cpu_ticks_of(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // After the name: state (field 3) … utime (14), stime (15).
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A mapping's header line `start-end perms offset dev inode [path]` (the path empty for an
/// anonymous mapping); `None` for a field line.
fn header(line: &str) -> Option<(usize, usize, &str, &str)> {
    let mut parts = line.splitn(6, |c: char| c.is_ascii_whitespace());
    let (start, end) = parts.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = parts.next()?;
    // offset, device and inode, then the path (which may hold spaces).
    let path = parts.nth(3).map_or("", str::trim);
    Some((start, end, perms, path))
}

/// `NAME   123 kB` → 123.
fn field_kib(line: &str, name: &str) -> Option<u64> {
    let rest = line.strip_prefix(name)?;
    rest.split_ascii_whitespace().next()?.parse().ok()
}

/// `madvise(MADV_DONTNEED)` over one releasable mapping.
#[allow(unsafe_code)]
fn advise_dontneed(mapping: &ExeMapping) -> io::Result<()> {
    // SAFETY: the range is one whole mapping of this executable, read-only and private, whose
    // pages are all the file's (no private copy: `Anonymous: 0 kB`, and a read-only mapping
    // gains none). Dropping them changes no byte any code can read: the next access maps the
    // same page again from the file. No Rust reference can be invalidated by that, since the
    // contents stay the same.
    let rc = unsafe {
        libc::madvise(
            mapping.start as *mut libc::c_void,
            mapping.end - mapping.start,
            libc::MADV_DONTNEED,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_are_released_once_per_quiet_stretch_after_work() {
        let mut idle = IdleRelease::new(Some(100), 10);
        assert!(idle.look(Some(103)), "quiet after the start: release");
        assert!(!idle.look(Some(106)), "still quiet: nothing new to release");
        assert!(!idle.look(Some(400)), "work");
        assert!(!idle.look(Some(900)), "more work");
        assert!(idle.look(Some(905)), "quiet again after work: release");
        assert!(!idle.look(None), "unreadable: no release, counted as work");
        assert!(
            !idle.look(Some(906)),
            "after an unreadable look, no stretch to judge"
        );
        assert!(idle.look(Some(907)));
    }

    #[test]
    fn the_cpu_time_is_read_after_the_command_name_whatever_it_holds() {
        let stat = "4242 (clawbus (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 17 5 0 0 20 0 14 0";
        assert_eq!(cpu_ticks_of(stat), Some(22));
        assert_eq!(cpu_ticks_of("4242 (clawbus) S 1"), None);
        assert!(cpu_ticks().is_some_and(|t| t < u64::MAX));
    }

    const SMAPS: &str = "\
5555aa000000-5555aa400000 r--p 00000000 fd:01 42 /opt/clawbus bin/clawbus
Size:               4096 kB
Rss:                3900 kB
Anonymous:             0 kB
5555aa400000-5555ac400000 r-xp 00400000 fd:01 42 /opt/clawbus bin/clawbus
Size:              32768 kB
Rss:               18000 kB
Anonymous:             0 kB
5555ac400000-5555ac600000 r--p 02400000 fd:01 42 /opt/clawbus bin/clawbus
Size:               2048 kB
Rss:                2048 kB
Anonymous:          2040 kB
5555ac600000-5555ac610000 rw-p 02600000 fd:01 42 /opt/clawbus bin/clawbus
Size:                 64 kB
Rss:                  64 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 77 /usr/lib/libc.so.6
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                1024 kB
Anonymous:          1024 kB
";

    /// The mappings of `exe` in `smaps` that [`release_start_pages`] would release, with their
    /// resident KiB.
    fn releasable(smaps: &str, exe: &str) -> Vec<(usize, usize, Option<u64>)> {
        exe_mappings(smaps, exe)
            .into_iter()
            .filter(ExeMapping::releasable)
            .map(|m| (m.start, m.end, m.rss_kib))
            .collect()
    }

    #[test]
    fn only_the_executables_read_only_mappings_without_private_pages_are_released() {
        let found = releasable(SMAPS, "/opt/clawbus bin/clawbus");
        assert_eq!(
            found,
            vec![
                (0x5555_aa00_0000, 0x5555_aa40_0000, Some(3900)),
                (0x5555_aa40_0000, 0x5555_ac40_0000, Some(18000)),
            ],
            "the relocated read-only data (private pages), the writable data and other files stay"
        );
        assert_eq!(
            exe_mappings(SMAPS, "/opt/clawbus bin/clawbus").len(),
            4,
            "every mapping of the executable is read, the others are not"
        );
    }

    #[test]
    fn the_shared_libraries_clean_read_only_mappings_are_released_too() {
        let smaps = format!(
            "{SMAPS}\
7f0000400000-7f0000500000 r--p 00000000 fd:01 78 /usr/lib/x86_64-linux-gnu/libm.so.6
Rss:                 300 kB
Anonymous:             0 kB
7f0000500000-7f0000510000 r--p 00100000 fd:01 78 /usr/lib/x86_64-linux-gnu/libm.so.6
Rss:                  64 kB
Anonymous:            60 kB
7f0000600000-7f0000700000 r--p 00000000 fd:01 79 /usr/share/fonts/a.ttf
Rss:                 100 kB
Anonymous:             0 kB
7f0000700000-7f0000800000 r--p 00000000 fd:01 80 /srv/state/so.data
Rss:                 100 kB
Anonymous:             0 kB
"
        );
        let libs: Vec<(usize, Option<u64>)> = library_mappings(&smaps)
            .into_iter()
            .filter(ExeMapping::releasable)
            .map(|m| (m.start, m.rss_kib))
            .collect();
        assert_eq!(
            libs,
            vec![(0x7f00_0000_0000, Some(900)), (0x7f00_0040_0000, Some(300))],
            "libc's code and libm's clean constants; libm's relocated page, other files and the \
             executable stay"
        );
    }

    #[test]
    fn a_mapping_whose_anonymous_count_is_missing_is_not_released() {
        let smaps = "\
5555aa000000-5555aa400000 r--p 00000000 fd:01 42 /bin/x
Rss:                3900 kB
";
        assert!(releasable(smaps, "/bin/x").is_empty());
    }

    #[test]
    fn the_allocators_options_are_set_and_the_neighbouring_one_is_untouched() {
        // The option after the purge delay in `mi_option_e` (the binding names that one).
        let after = libmimalloc_sys::mi_option_use_numa_nodes;
        assert_eq!(MI_OPTION_PURGE_DELAY + 1, after);
        // SAFETY: reads a global option.
        #[allow(unsafe_code)]
        let neighbour = || unsafe { libmimalloc_sys::mi_option_get(after) };
        let kept = neighbour();
        // The generic-collect option's place: its default (10,000) is no other option's.
        let collect_default = option(MI_OPTION_GENERIC_COLLECT);
        assert!(
            collect_default == 10_000 || collect_default == GENERIC_COLLECT,
            "option {MI_OPTION_GENERIC_COLLECT} is not generic_collect: {collect_default}"
        );
        tune_allocator();
        assert_eq!(option(MI_OPTION_PURGE_DELAY), PURGE_DELAY_MS);
        assert_eq!(option(MI_OPTION_GENERIC_COLLECT), GENERIC_COLLECT);
        assert_eq!(neighbour(), kept);
        // Allocating and freeing a lot goes on as before.
        let blocks: Vec<Vec<u8>> = (0..1000).map(|i| vec![1u8; 64 + i]).collect();
        assert_eq!(
            blocks.iter().map(Vec::len).sum::<usize>(),
            1000 * 64 + 999 * 500
        );
    }

    /// The test binary's own pages: released, and everything runs on as before.
    #[test]
    fn releasing_this_processs_start_pages_keeps_it_running() {
        let first = release_start_pages().expect("release");
        if cfg!(target_os = "linux") {
            assert!(
                first.mappings >= 1,
                "the code mapping is released: {first:?}"
            );
        }
        // Code and constant data still work: run a little of each.
        let text: String = (0..100).map(|i| format!("{i},")).collect();
        assert!(text.starts_with("0,1,2,"));
        let again = release_start_pages().expect("release again");
        assert_eq!(again.mappings, first.mappings);
    }
}
