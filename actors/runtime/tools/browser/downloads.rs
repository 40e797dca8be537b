//! Where a browser's downloads are written, and how a finished one reaches the workspace.
//!
//! Chromium writes every download into a staging folder beside the agent's profile, outside the
//! workspace. Only a download that completed within `max_download_bytes` is moved into the
//! workspace's `downloads/`, under its suggested name made safe, never over a file already there.
//! A download over the cap is cancelled, and what it wrote stays in staging, where the model
//! never looks: Chromium may go on writing a cancelled download's file for a moment after it
//! says it was cancelled (seen under load: 104,766 bytes of a cancelled 5 MB download came back
//! after it was deleted), so deleting it from the workspace was not enough. Staging is emptied
//! when the browser starts (what a killed browser left) and when it stops.

use std::io;
use std::path::{Path, PathBuf};

/// Folder of the workspace downloads land in.
pub(crate) const DOWNLOADS: &str = "downloads";
/// Folder beside the profile that Chromium writes downloads into.
pub(crate) const STAGING: &str = "downloads.partial";
/// How many `<n>-<name>` variants are tried before a download is left where it is.
const MAX_NAMES: u32 = 100;

/// The two folders of one browser's downloads.
#[derive(Debug, Clone)]
pub(crate) struct Folders {
    /// Where Chromium writes (outside the workspace).
    pub staging: PathBuf,
    /// The workspace, whose `downloads/` finished downloads are moved into.
    workspace: PathBuf,
}

/// What became of a finished download.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// Moved into the workspace under this name.
    As(String),
    /// Larger than the cap after all: deleted.
    OverCap(u64),
}

impl Folders {
    /// `agent_dir/downloads.partial` and `workspace/downloads`.
    pub(crate) fn new(agent_dir: &Path, workspace: &Path) -> Self {
        Self {
            staging: agent_dir.join(STAGING),
            workspace: workspace.to_path_buf(),
        }
    }

    /// Empties staging (what an earlier browser left) and makes it; makes the workspace's
    /// `downloads/` too, or says why not (a delivery checks again).
    pub(crate) fn prepare(&self) -> io::Result<()> {
        self.clear_staging();
        std::fs::create_dir_all(&self.staging)?;
        if let Err(e) = self.downloads_dir() {
            tracing::warn!(error = %e, "The workspace's downloads folder could not be made.");
        }
        Ok(())
    }

    /// The workspace's `downloads/`, made if missing, through the workspace's confinement: a
    /// `downloads` that is a link out of the workspace is refused, never written through.
    /// Checked again once it exists, as every folder a tool makes in the workspace is: nothing
    /// may have turned it into a way out between the check and the making.
    fn downloads_dir(&self) -> io::Result<PathBuf> {
        let confined =
            || crate::workspace::confine(&self.workspace, DOWNLOADS).map_err(io::Error::other);
        std::fs::create_dir_all(confined()?)?;
        confined()
    }

    /// Removes staging and everything in it.
    pub(crate) fn clear_staging(&self) {
        match std::fs::remove_dir_all(&self.staging) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                path = %self.staging.display(),
                error = %e,
                "The browser's download staging folder could not be emptied."
            ),
        }
    }

    /// Deletes what download `guid` wrote into staging.
    pub(crate) fn discard(&self, guid: &str) {
        for name in [guid.to_string(), format!("{guid}.crdownload")] {
            match std::fs::remove_file(self.staging.join(&name)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "A refused download could not be deleted.")
                }
            }
        }
    }

    /// Moves finished download `guid` (saved in staging under its guid) into the workspace
    /// under `suggested` made safe, unless it is larger than `cap` bytes.
    pub(crate) fn deliver(&self, guid: &str, suggested: &str, cap: u64) -> io::Result<Delivered> {
        let src = self.staging.join(guid);
        let len = std::fs::metadata(&src)?.len();
        if len > cap {
            self.discard(guid);
            return Ok(Delivered::OverCap(len));
        }
        let dir = self.downloads_dir()?;
        let base = safe_name(suggested, guid);
        let name = place(&src, &dir, &base)?;
        if let Err(e) = std::fs::remove_file(&src) {
            tracing::warn!(guid, error = %e, "A delivered download's staging copy could not be deleted.");
        }
        Ok(Delivered::As(name))
    }
}

/// `suggested` with everything but letters, digits, `.`, `_` and `-` replaced, and no leading
/// dot; `fallback` when nothing is left.
fn safe_name(suggested: &str, fallback: &str) -> String {
    let base: String = suggested
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = base.trim_start_matches('.');
    if base.is_empty() {
        fallback.to_string()
    } else {
        base.to_string()
    }
}

/// Puts a copy of `src` in `dir` as `base`, or `<n>-base` when that name is taken; never
/// replaces a file (nor follows a link) already there. Answers the name used.
fn place(src: &Path, dir: &Path, base: &str) -> io::Result<String> {
    for n in 1..=MAX_NAMES {
        let name = if n == 1 {
            base.to_string()
        } else {
            format!("{n}-{base}")
        };
        let to = dir.join(&name);
        let placed = match std::fs::hard_link(src, &to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
            // Another filesystem, or one without hard links: copy into a new file.
            Err(_) => copy_new(src, &to),
        };
        match placed {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{MAX_NAMES} files named like {base} are in the downloads folder already"),
    ))
}

/// Copies `src` into `to`, which must not exist; removes a partial copy on failure.
fn copy_new(src: &Path, to: &Path) -> io::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    let copied = std::fs::File::open(src).and_then(|mut f| io::copy(&mut f, &mut out));
    if let Err(e) = copied {
        let _gone = std::fs::remove_file(to);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folders() -> (tempfile::TempDir, Folders) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("ws")).unwrap();
        let f = Folders::new(&root.path().join("agent"), &root.path().join("ws"));
        f.prepare().unwrap();
        (root, f)
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_finished_download_moves_under_its_safe_name_and_never_over_a_file() {
        let (_root, f) = folders();
        std::fs::write(f.workspace.join(DOWNLOADS).join("report.pdf"), b"mine").unwrap();
        for (guid, body) in [("g1", "first"), ("g2", "second")] {
            std::fs::write(f.staging.join(guid), body).unwrap();
        }
        assert_eq!(
            f.deliver("g1", "report.pdf", 100).unwrap(),
            Delivered::As("2-report.pdf".into())
        );
        assert_eq!(
            f.deliver("g2", "../../.bashrc", 100).unwrap(),
            Delivered::As("_.._.bashrc".into())
        );
        assert_eq!(
            std::fs::read_to_string(f.workspace.join(DOWNLOADS).join("report.pdf")).unwrap(),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(f.workspace.join(DOWNLOADS).join("2-report.pdf")).unwrap(),
            "first"
        );
        assert_eq!(listing(&f.staging), Vec::<String>::new());
    }

    #[test]
    fn a_finished_download_over_the_cap_is_deleted_not_delivered() {
        let (_root, f) = folders();
        std::fs::write(f.staging.join("g"), vec![0u8; 101]).unwrap();
        assert_eq!(
            f.deliver("g", "big.bin", 100).unwrap(),
            Delivered::OverCap(101)
        );
        assert_eq!(listing(&f.staging), Vec::<String>::new());
        assert_eq!(listing(&f.workspace.join(DOWNLOADS)), Vec::<String>::new());
    }

    #[test]
    fn what_a_cancelled_download_writes_after_its_discard_never_reaches_the_workspace() {
        let (_root, f) = folders();
        std::fs::write(f.staging.join("g"), vec![0u8; 10]).unwrap();
        f.discard("g");
        // Chromium's file thread writes on after it announced the cancel.
        std::fs::write(f.staging.join("g"), vec![0u8; 104_766]).unwrap();
        assert_eq!(listing(&f.workspace.join(DOWNLOADS)), Vec::<String>::new());
        // The next start empties staging.
        f.prepare().unwrap();
        assert_eq!(listing(&f.staging), Vec::<String>::new());
    }

    #[test]
    fn a_downloads_folder_that_is_a_link_is_not_written_through() {
        let (root, f) = folders();
        let downloads = f.workspace.join(DOWNLOADS);
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::remove_dir(&downloads).unwrap();
        std::os::unix::fs::symlink(&outside, &downloads).unwrap();
        std::fs::write(f.staging.join("g"), b"x").unwrap();
        let e = f.deliver("g", "x.txt", 100).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert_eq!(listing(&outside), Vec::<String>::new());
    }

    #[test]
    fn a_copy_to_a_name_taken_meanwhile_is_refused_and_leaves_the_file_alone() {
        let (_root, f) = folders();
        std::fs::write(f.staging.join("g"), b"new").unwrap();
        std::fs::write(f.workspace.join(DOWNLOADS).join("a.txt"), b"old").unwrap();
        let e = copy_new(
            &f.staging.join("g"),
            &f.workspace.join(DOWNLOADS).join("a.txt"),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read(f.workspace.join(DOWNLOADS).join("a.txt")).unwrap(),
            b"old"
        );
    }
}
