//! OpenClaw's Control UI (its npm package's `dist/control-ui` folder), served on the gateway's
//! port when `[gateway] control_ui_dir` names it: `GET /` without a WebSocket upgrade answers its
//! `index.html`, other paths its files (an unknown path without an extension is one of its pages:
//! `index.html` again), and `GET /control-ui-config.json` the bootstrap config it reads first.
//! Without the setting these answer 404 as any unknown path does.

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
    if state.config.gateway.control_ui_dir.is_none() {
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
            "no route GET {path} (the Control UI is served when [gateway] control_ui_dir is set)"
        ),
    )
}

/// The file of the Control UI at `path`, when it is served and `path` names one (or a page).
pub(crate) async fn asset(state: &ApiState, path: &str) -> Option<Response> {
    let dir = state.config.gateway.control_ui_dir.as_ref()?;
    let file = file_of(dir, path)?;
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

/// The file `path` names under `dir`: never outside it; `index.html` for `/` and for a page.
fn file_of(dir: &Path, path: &str) -> Option<PathBuf> {
    let mut file = dir.to_path_buf();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts
        .iter()
        .any(|p| *p == ".." || *p == "." || p.contains('\\'))
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
            content_type(&d.join("assets/app.js")),
            "text/javascript; charset=utf-8"
        );
    }
}
