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

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The linker flag for packed relative relocations.
const PACK_RELATIVE_RELOCS: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
    let child = Command::new(linker)
        .args(["-x", "c", "-", "-pie", "-fPIE", "-o"])
        .arg(&probe)
        .arg(PACK_RELATIVE_RELOCS)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let source = b"static const char *p = \"x\"; int main(void) { return p[0] != 'x'; }\n";
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(source).is_ok());
    let linked = child.wait().is_ok_and(|status| status.success());
    wrote && linked && Command::new(&probe).status().is_ok_and(|s| s.success())
}
