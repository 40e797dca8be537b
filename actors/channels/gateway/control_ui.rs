//! OpenClaw's Control UI (its npm package's `dist/control-ui` folder), served on the gateway's
//! port: `GET /` without a WebSocket upgrade answers its `index.html`, other paths its files (an
//! unknown path without an extension, outside `/v1/`, is one of its pages: `index.html` again),
//! and `GET /control-ui-config.json` the bootstrap config it reads first.
//!
//! The folder is `[gateway] control_ui_dir` when set. Otherwise OpenClaw's npm package is looked
//! for on this machine, once, when a page is first asked for ([`found`]); nothing is fetched from
//! the network. Without either these paths answer 404 as any unknown path does.

use super::api::{ApiState, error};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The bootstrap config route.
pub(crate) fn routes() -> Router<ApiState> {
    Router::new().route("/control-ui-config.json", get(config))
}

async fn config(State(state): State<ApiState>) -> Response {
    if served_from(&state).await.is_none() {
        return not_served("/control-ui-config.json");
    }
    let agent = state.config.agents.first().map(|a| a.id.to_string());
    axum::Json(json!({
        "basePath": "",
        "assistantName": agent.clone().unwrap_or_else(|| "clawbus".into()),
        "assistantAgentId": agent,
        "serverVersion": env!("CARGO_PKG_VERSION"),
        "embedSandbox": "scripts",
        "allowExternalEmbedUrls": false,
        "automaticallyFetchFavicons": false,
        "communityInvite": false,
        "terminalEnabled": false,
        "cliAgentsEnabled": false,
        "pluginAssetsRequireAuth": true,
        "pluginFrameGrants": [],
    }))
    .into_response()
}

fn not_served(path: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no_route",
        format!(
            "no route GET {path} (the Control UI is served when [gateway] control_ui_dir is set or OpenClaw's npm package is installed)"
        ),
    )
}

/// The file of the Control UI at `path`, when it is served and `path` names one (or a page).
pub(crate) async fn asset(state: &ApiState, path: &str) -> Option<Response> {
    let dir = served_from(state).await?;
    let file = file_of(&dir, path)?;
    let bytes = tokio::fs::read(&file).await.ok()?;
    let cache = if file.ends_with("index.html") {
        "no-cache"
    } else {
        "public, max-age=3600"
    };
    Some(
        (
            [
                (header::CONTENT_TYPE, content_type(&file)),
                (header::CACHE_CONTROL, cache),
            ],
            bytes,
        )
            .into_response(),
    )
}

/// The folder the Control UI is served from: `[gateway] control_ui_dir`, else the one [`found`].
async fn served_from(state: &ApiState) -> Option<PathBuf> {
    if let Some(dir) = &state.config.gateway.control_ui_dir {
        return Some(dir.clone());
    }
    FOUND.get_or_init(found).await.clone()
}

/// The folder found on this machine (looked for once per process).
static FOUND: tokio::sync::OnceCell<Option<PathBuf>> = tokio::sync::OnceCell::const_new();

/// The Control UI inside an npm package folder `node_modules`.
fn in_node_modules(root: &Path) -> PathBuf {
    root.join("openclaw/dist/control-ui")
}

/// OpenClaw's Control UI installed on this machine, looked for in order:
/// `$CLAWBUS_OPENCLAW_DIR/node_modules/openclaw` (a local install, as `.ci/run` makes), the
/// global npm folder `npm root -g` names (when `npm` runs within [`NPM_WITHIN`]), then the
/// usual global folders (`/usr/local/lib/node_modules`, `/usr/lib/node_modules`,
/// `/opt/homebrew/lib/node_modules`, `~/.npm-global/lib/node_modules`). A candidate counts when
/// it holds `index.html`.
async fn found() -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CLAWBUS_OPENCLAW_DIR").filter(|d| !d.is_empty()) {
        roots.push(PathBuf::from(dir).join("node_modules"));
    }
    roots.extend(npm_root().await);
    roots.extend(
        [
            "/usr/local/lib/node_modules",
            "/usr/lib/node_modules",
            "/opt/homebrew/lib/node_modules",
        ]
        .map(PathBuf::from),
    );
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".npm-global/lib/node_modules"));
    }
    let found = first_with_index(roots.iter().map(|r| in_node_modules(r)));
    match &found {
        Some(dir) => {
            tracing::info!(dir = %dir.display(), "Serving OpenClaw's Control UI found on this machine.")
        }
        None => tracing::debug!(
            looked_in = ?roots,
            "OpenClaw's Control UI is not installed here; not served."
        ),
    }
    found
}

/// How long `npm root -g` may take.
const NPM_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The folder `npm root -g` prints, if npm is there and answers in time.
async fn npm_root() -> Option<PathBuf> {
    let mut cmd = tokio::process::Command::new("npm");
    cmd.args(["root", "-g"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(NPM_WITHIN, cmd.output())
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(4096)]);
    let line = text.lines().next()?.trim();
    (out.status.success() && !line.is_empty()).then(|| PathBuf::from(line))
}

/// The first of `dirs` holding an `index.html`.
fn first_with_index(dirs: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    dirs.into_iter().find(|d| d.join("index.html").is_file())
}

/// The file `path` names under `dir`: never outside it; `index.html` for `/` and for a page
/// (never under `/v1/`, the HTTP API's own).
fn file_of(dir: &Path, path: &str) -> Option<PathBuf> {
    let mut file = dir.to_path_buf();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts
        .iter()
        .any(|p| *p == ".." || *p == "." || p.contains('\\'))
        || parts.first() == Some(&"v1")
    {
        return None;
    }
    for p in &parts {
        file.push(p);
    }
    if file.is_file() {
        return Some(file);
    }
    let page = parts.last().is_none_or(|last| !last.contains('.'));
    page.then(|| dir.join("index.html"))
}

fn content_type(file: &Path) -> &'static str {
    match file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "wasm" => "application/wasm",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_folder_holding_index_html_is_the_one_served() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ui = |root: &Path| in_node_modules(root);
        std::fs::create_dir_all(ui(a.path())).unwrap();
        std::fs::create_dir_all(ui(b.path())).unwrap();
        std::fs::write(ui(b.path()).join("index.html"), "<html>").unwrap();
        let dirs = [ui(Path::new("/nonexistent")), ui(a.path()), ui(b.path())];
        assert_eq!(
            first_with_index(dirs),
            Some(b.path().join("openclaw/dist/control-ui")),
            "a folder without index.html is passed over"
        );
        assert_eq!(first_with_index([ui(a.path())]), None);
    }

    #[test]
    fn paths_map_to_files_inside_the_folder_and_pages_to_index_html() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "<html>").unwrap();
        std::fs::create_dir(dir.path().join("assets")).unwrap();
        std::fs::write(dir.path().join("assets/app.js"), "x").unwrap();
        let d = dir.path();
        assert_eq!(file_of(d, "/"), Some(d.join("index.html")));
        assert_eq!(file_of(d, "/assets/app.js"), Some(d.join("assets/app.js")));
        assert_eq!(file_of(d, "/chat"), Some(d.join("index.html")), "a page");
        assert_eq!(file_of(d, "/assets/missing.js"), None);
        assert_eq!(file_of(d, "/../secret"), None);
        assert_eq!(
            file_of(d, "/v1/nothing"),
            None,
            "the API's paths are never pages"
        );
        assert_eq!(
            content_type(&d.join("assets/app.js")),
            "text/javascript; charset=utf-8"
        );
    }
}
