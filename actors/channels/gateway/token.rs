//! The gateway token: random on first start, kept in `<state-dir>/gateway.token` with mode 0600.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub use clawbus_core::config::{TOKEN_FILE, token_path};

/// Reads the token, creating it (32 random bytes, hex) on first start.
pub(crate) fn load_or_create(state_dir: &Path) -> io::Result<String> {
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

/// The token of an `Authorization` header value: `Bearer <token>`, the scheme in any case (RFC
/// 9110: schemes are case-insensitive; `bearer` is what some clients send). `None` for another
/// scheme or none.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// True when `headers` carry `Authorization: Bearer <expected>`.
pub fn presented(expected: &str, headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .is_some_and(|t| matches(expected, t))
}

#[cfg(test)]
mod bearer_tests {
    use super::bearer;

    #[test]
    fn the_scheme_is_taken_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
