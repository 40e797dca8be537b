//! Link flags for the `clawbus` binary.
//!
//! On Linux with glibc, the binary is a position-independent executable whose pointers in
//! read-only data are fixed up by the loader at every start. Packed relative relocations
//! (`-z pack-relative-relocs`, `DT_RELR`) store those fix-ups in about 40 KB instead of about
//! 2.5 MB, so a start reads and keeps resident less of the binary (idle VmRSS of
//! the release daemon 29.8 → 26.2 MiB, `benches/memory.py --maps`), while the executable keeps its
//! address randomisation.
//! They need binutils ≥ 2.38 and glibc ≥ 2.36; the flag is passed only when a probe program
//! links and runs with it here, so an older toolchain builds the binary as before. A binary
//! built so needs glibc ≥ 2.36 where it runs too: build with `CLAWBUS_NO_PACKED_RELOCS=1` for an
//! older host.
//!
//! In a release build the functions a turn runs are laid out together, hottest first, in the
//! order `actors/main/symbol-order.txt` lists them (written by `benches/callgrind.py
//! --symbol-order`, the linker's `--symbol-ordering-file`). Every page fault on the code maps up
//! to 64 KiB around it, so a turn's 2 MB of code spread over 28 MB kept about 10 MiB of the
//! binary resident under load; laid out together it is about 3 MiB. A name the binary lacks (a
//! function renamed since the list was written) is skipped: a stale list costs memory, never
//! correctness. A changed Cargo.lock renames whole crates' functions (their mangled names carry
//! a hash of the crate's metadata), so the list records the Cargo.lock it was written for
//! (`actors/main/symbol-order.lock`) and a release build warns when it differs. The flag is passed only when rustc's linker takes it (LLD, rustc's default on
//! x86-64 Linux); `CLAWBUS_NO_SYMBOL_ORDER=1` leaves the default layout.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The linker flag for packed relative relocations.
const PACK_RELATIVE_RELOCS: &str = "-Wl,-z,pack-relative-relocs";

/// The list of functions to lay out first, relative to the package's root.
const SYMBOL_ORDER: &str = "actors/main/symbol-order.txt";

/// The fingerprint of the Cargo.lock the list was written for, relative to the package's root.
const SYMBOL_ORDER_LOCK: &str = "actors/main/symbol-order.lock";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    order_symbols();
    println!("cargo:rerun-if-env-changed=CLAWBUS_NO_PACKED_RELOCS");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || env != "gnu" || std::env::var_os("CLAWBUS_NO_PACKED_RELOCS").is_some() {
        return;
    }
    // Cross builds link with another toolchain than the probe would run: leave them as they are.
    if std::env::var("TARGET").ok() != std::env::var("HOST").ok() {
        return;
    }
    if probe_links_and_runs() {
        println!("cargo:rustc-link-arg-bins={PACK_RELATIVE_RELOCS}");
    } else {
        println!(
            "cargo:warning=the linker or libc lacks {PACK_RELATIVE_RELOCS}: the binary is linked without it"
        );
    }
}

/// Whether a small C program links with the flag by the linker rustc uses (the configured one,
/// which cargo passes as `RUSTC_LINKER`, else `cc`) and then runs.
fn probe_links_and_runs() -> bool {
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let probe = out_dir.join("pack-relative-relocs-probe");
    let linker = std::env::var_os("RUSTC_LINKER").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(linker);
    cmd.args(["-x", "c", "-", "-pie", "-fPIE", "-o"])
        .arg(&probe)
        .arg(PACK_RELATIVE_RELOCS);
    let source = b"static const char *p = \"x\"; int main(void) { return p[0] != 'x'; }\n";
    builds(cmd, source) && Command::new(&probe).status().is_ok_and(|s| s.success())
}

/// Whether `cmd` (a compiler reading its source from stdin) succeeds on `source`, its output
/// silenced.
fn builds(mut cmd: Command, source: &[u8]) -> bool {
    let child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(source).is_ok());
    let built = child.wait().is_ok_and(|status| status.success());
    wrote && built
}

/// Passes the symbol order to the linker of the `clawbus` binary in a release build, when rustc's
/// linker takes it.
fn order_symbols() {
    println!("cargo:rerun-if-changed={SYMBOL_ORDER}");
    println!("cargo:rerun-if-env-changed=CLAWBUS_NO_SYMBOL_ORDER");
    if std::env::var("PROFILE").as_deref() != Ok("release")
        || std::env::var_os("CLAWBUS_NO_SYMBOL_ORDER").is_some()
    {
        return;
    }
    let Some(root) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        return;
    };
    let list = root.join(SYMBOL_ORDER);
    if !list.is_file() {
        return;
    }
    warn_if_stale(&root);
    let flags = [
        format!("-Wl,--symbol-ordering-file={}", list.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if rustc_links_with(&flags) {
        for flag in flags {
            println!("cargo:rustc-link-arg-bin=clawbus={flag}");
        }
    } else {
        println!(
            "cargo:warning=the linker does not take --symbol-ordering-file (not LLD): the binary keeps the default layout"
        );
    }
}

/// Warns when the symbol order was written for another Cargo.lock than this build's: a mangled
/// name carries a hash of its crate's metadata (version, source, dependencies), so most of the
/// list would name functions this build does not have, and the linker skips them silently.
fn warn_if_stale(root: &std::path::Path) {
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed={SYMBOL_ORDER_LOCK}");
    let Ok(lock) = std::fs::read(root.join("Cargo.lock")) else {
        return;
    };
    let now = format!("{:016x}", fnv1a64(&lock));
    let recorded = std::fs::read_to_string(root.join(SYMBOL_ORDER_LOCK)).unwrap_or_default();
    let recorded = recorded
        .lines()
        .find_map(|l| l.strip_prefix("cargo-lock-fnv1a64 "))
        .map(str::trim);
    if recorded != Some(now.as_str()) {
        println!(
            "cargo:warning={SYMBOL_ORDER} was written for another Cargo.lock: the release daemon keeps megabytes more code resident; rewrite it (python3 benches/callgrind.py --symbol-order {SYMBOL_ORDER}) and rebuild"
        );
    }
}

/// FNV-1a, 64 bits (as `benches/callgrind.py` computes it).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether an empty Rust program links with `flags` by rustc's linker for this target (the
/// configured one, which cargo passes as `RUSTC_LINKER`, else rustc's default).
fn rustc_links_with(flags: &[String]) -> bool {
    let (Some(out_dir), Some(rustc)) = (std::env::var_os("OUT_DIR"), std::env::var_os("RUSTC"))
    else {
        return false;
    };
    let probe = PathBuf::from(out_dir).join("symbol-order-probe");
    let mut cmd = Command::new(rustc);
    cmd.args(["--crate-type", "bin", "--crate-name", "probe", "-o"])
        .arg(&probe);
    if let Ok(target) = std::env::var("TARGET") {
        cmd.args(["--target", &target]);
    }
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        cmd.arg("-C")
            .arg(format!("linker={}", linker.to_string_lossy()));
    }
    for flag in flags {
        cmd.arg("-C").arg(format!("link-arg={flag}"));
    }
    cmd.arg("-");
    builds(cmd, b"fn main() {}\n")
}
