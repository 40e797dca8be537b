//! The Python with the official MCP SDK that `.ci/run` installs in a venv.

/// The Python that `CLAWBUS_TEST_MCP_PYTHON` names (one with the `mcp` package), or `None`
/// after printing that the test is skipped.
///
/// # Panics
/// When it is not set and `CI=true`, where a skipped test would hide a missing dependency.
#[allow(clippy::panic)]
pub fn mcp_python_or_skip() -> Option<String> {
    match std::env::var("CLAWBUS_TEST_MCP_PYTHON") {
        Ok(p) => Some(p),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "CI=true but CLAWBUS_TEST_MCP_PYTHON is not set (.ci/run installs the mcp package)"
            )
        }
        Err(_) => {
            println!("skipped: set CLAWBUS_TEST_MCP_PYTHON to a python with the mcp package");
            None
        }
    }
}
