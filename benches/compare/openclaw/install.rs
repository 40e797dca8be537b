//! OpenClaw and a Node ≥ 24 installed from npm into a cache folder, once.
//!
//! The machine's `npm` installs the npm package `node` (it ships a `node` binary for this
//! platform) and then `openclaw` into `<cache>/node_modules`; the second step runs with the cache's
//! `node_modules/.bin` first on `PATH`, because OpenClaw's install scripts refuse an older Node.
//! A cache that already holds both, at the pinned versions, is used as it is.

use super::OpenClawError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The OpenClaw release measured (the one `OPENCLAW-FACTS.md` describes).
pub(crate) const OPENCLAW_VERSION: &str = "2026.9.6";
/// The npm package `node` installed next to it: OpenClaw 2026.9.6 wants
/// `>=24.16.0 <25 || >=26.1.0`, and the machine's own Node may be older.
pub(crate) const NODE_VERSION: &str = "24.21.0";

/// The cache folder: `--openclaw-cache DIR`, else `$XDG_CACHE_HOME/clawbus-bench`, else
/// `$HOME/.cache/clawbus-bench`. Empty variables count as unset.
pub(crate) fn cache_dir(
    flag: Option<&Path>,
    xdg_cache_home: Option<&str>,
    home: Option<&str>,
) -> Option<PathBuf> {
    let set = |v: Option<&str>| v.filter(|v| !v.trim().is_empty()).map(PathBuf::from);
    flag.map(Path::to_path_buf)
        .or_else(|| set(xdg_cache_home).map(|d| d.join("clawbus-bench")))
        .or_else(|| set(home).map(|h| h.join(".cache/clawbus-bench")))
}

/// What the install step did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InstallOutcome {
    /// Both packages were already in the cache at the pinned versions.
    Cached,
    /// npm installed them; how long each step took.
    Installed {
        /// `npm install node@…`.
        node: Duration,
        /// `npm install openclaw@…`.
        openclaw: Duration,
    },
}

/// An OpenClaw install in the cache folder.
#[derive(Debug, Clone)]
pub(crate) struct Install {
    /// The cache folder (`npm install --prefix`).
    pub root: PathBuf,
    /// What the install step did.
    pub outcome: InstallOutcome,
}

impl Install {
    /// Uses the cache if it holds both packages at the pinned versions, else installs them.
    pub(crate) fn ensure(root: &Path) -> Result<Self, OpenClawError> {
        let mut install = Install {
            root: root.to_path_buf(),
            outcome: InstallOutcome::Cached,
        };
        if install.installed_versions() == Some((NODE_VERSION.into(), OPENCLAW_VERSION.into())) {
            return Ok(install);
        }
        std::fs::create_dir_all(root).map_err(|e| OpenClawError::io(root, e))?;
        let node = install.npm_install(&format!("node@{NODE_VERSION}"))?;
        let openclaw = install.npm_install(&format!("openclaw@{OPENCLAW_VERSION}"))?;
        match install.installed_versions() {
            Some((n, o)) if n == NODE_VERSION && o == OPENCLAW_VERSION => {}
            found => {
                return Err(OpenClawError::Install {
                    step: "version check after npm install".into(),
                    detail: format!(
                        "expected node {NODE_VERSION} and openclaw {OPENCLAW_VERSION} in {}, found {found:?}",
                        root.display()
                    ),
                });
            }
        }
        install.outcome = InstallOutcome::Installed { node, openclaw };
        Ok(install)
    }

    /// The Node binary from the npm package `node`.
    pub(crate) fn node(&self) -> PathBuf {
        self.root.join("node_modules/node/bin/node")
    }

    /// OpenClaw's CLI entry point, run as `node openclaw.mjs …`.
    pub(crate) fn entry(&self) -> PathBuf {
        self.root.join("node_modules/openclaw/openclaw.mjs")
    }

    /// `node_modules/.bin`, put first on `PATH` so OpenClaw's own children find the cache's Node.
    pub(crate) fn bin_dir(&self) -> PathBuf {
        self.root.join("node_modules/.bin")
    }

    /// The caller's `PATH` with [`Install::bin_dir`] first (the caller's alone if that cannot
    /// be joined).
    pub(crate) fn path_env(&self) -> std::ffi::OsString {
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        std::env::join_paths(
            std::iter::once(self.bin_dir()).chain(std::env::split_paths(&inherited)),
        )
        .unwrap_or(inherited)
    }

    /// `(node, openclaw)` versions found in the cache: Node's from running the binary, so a
    /// package whose binary is missing counts as not installed.
    fn installed_versions(&self) -> Option<(String, String)> {
        let out = Command::new(self.node()).arg("--version").output().ok()?;
        let node = String::from_utf8_lossy(&out.stdout)
            .trim()
            .trim_start_matches('v')
            .to_string();
        let manifest =
            std::fs::read_to_string(self.root.join("node_modules/openclaw/package.json")).ok()?;
        let openclaw = serde_json::from_str::<serde_json::Value>(&manifest).ok()?["version"]
            .as_str()?
            .to_string();
        (out.status.success() && !node.is_empty()).then_some((node, openclaw))
    }

    /// `npm install --prefix <root> <spec>` with the machine's npm, the cache's `.bin` first on
    /// `PATH`; how long it took.
    fn npm_install(&self, spec: &str) -> Result<Duration, OpenClawError> {
        let path = self.path_env();
        eprintln!(
            "compare: npm install --prefix {} {spec}",
            self.root.display()
        );
        let t = Instant::now();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&self.root)
            .arg(spec)
            .env("PATH", path)
            .output()
            .map_err(|e| OpenClawError::Install {
                step: format!("npm install {spec}"),
                detail: format!("could not run npm: {e}"),
            })?;
        if !out.status.success() {
            return Err(OpenClawError::Install {
                step: format!("npm install {spec}"),
                detail: format!("{}: {}", out.status, tail(&out.stderr, 1500)),
            });
        }
        Ok(t.elapsed())
    }
}

/// The last `max` bytes of a process's output, as text.
pub(crate) fn tail(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let start = text.len().saturating_sub(max);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].trim().to_string()
}
