//! The gateway token: random on first start, kept in `<state-dir>/gateway.token` with mode 0600.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub use crate::config::{TOKEN_FILE, token_path};

/// Reads the token, creating it (32 random bytes, hex) on first start.
pub fn load_or_create(state_dir: &Path) -> io::Result<String> {
    let path = token_path(state_dir);
    std::fs::create_dir_all(state_dir)?;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => {
            let token = random_token();
            f.write_all(token.as_bytes())?;
            f.sync_all()?;
            Ok(token)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read(&path),
        Err(e) => Err(e),
    }
}

/// Reads an existing token file.
pub fn read(path: &Path) -> io::Result<String> {
    let token = std::fs::read_to_string(path)?.trim().to_string();
    if token.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is empty", path.display()),
        ));
    }
    Ok(token)
}

fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares a presented token with the expected one in constant time.
pub fn matches(expected: &str, presented: &str) -> bool {
    use subtle::ConstantTimeEq;
    expected.as_bytes().ct_eq(presented.as_bytes()).into()
}
