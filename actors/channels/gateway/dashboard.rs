//! The dashboard: a browser UI at `/ui/` on the gateway's port, served from files compiled into
//! the binary (`dashboard/`: plain HTML, CSS and JavaScript modules, no build step).
//!
//! The files are public (they hold no data); every call the page makes to the API carries the
//! gateway token the user typed (kept in the tab's session storage). Every answer here has a
//! strict Content-Security-Policy (scripts, styles and calls from this origin only, no inline
//! script, no frames) and `X-Frame-Options: DENY`.

use super::api::{ApiState, error};
use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// The policy every dashboard answer carries.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// The dashboard's files: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("dashboard/index.html"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("dashboard/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/dom.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/overview.js"),
    ),
    (
        "tasks.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/tasks.js"),
    ),
    (
        "task.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/task.js"),
    ),
    (
        "sessions.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/sessions.js"),
    ),
    (
        "cron.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/cron.js"),
    ),
    (
        "approvals.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/approvals.js"),
    ),
    (
        "chat.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/chat.js"),
    ),
    (
        "flows.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/flows.js"),
    ),
    (
        "nodes.js",
        "text/javascript; charset=utf-8",
        include_str!("dashboard/nodes.js"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("dashboard/icon.svg"),
    ),
];

/// The dashboard's routes (outside `/v1`, no token: the files are public).
pub(crate) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { file("index.html") }))
        .route(
            "/ui/{name}",
            get(|Path(name): Path<String>| async move { file(&name) }),
        )
}

/// The total size of the dashboard's files, in bytes (what a first visit downloads).
pub fn weight() -> usize {
    FILES.iter().map(|(_, _, body)| body.len()).sum()
}

fn file(name: &str) -> Response {
    let Some((_, content_type, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        let mut answer = error(
            StatusCode::NOT_FOUND,
            "no_route",
            format!("no dashboard file {name:?} (the dashboard is at /ui/)"),
        );
        secure(&mut answer);
        return answer;
    };
    let mut answer = (
        [
            (header::CONTENT_TYPE, *content_type),
            // Small files, revalidated: a new binary's dashboard shows at once.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        *body,
    )
        .into_response();
    secure(&mut answer);
    answer
}

/// Adds the security headers every dashboard answer carries.
fn secure(answer: &mut Response) {
    let headers = answer.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_the_headers_and_the_page_stays_small() {
        for (name, content_type, _) in FILES {
            let answer = file(name);
            assert_eq!(answer.status(), StatusCode::OK, "{name}");
            let h = answer.headers();
            assert_eq!(h[header::CONTENT_TYPE], *content_type, "{name}");
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP, "{name}");
            assert_eq!(h[header::X_FRAME_OPTIONS], "DENY", "{name}");
        }
        assert_eq!(file("../secret").status(), StatusCode::NOT_FOUND);
        assert!(
            weight() < 200 * 1024,
            "the dashboard weighs {} bytes",
            weight()
        );
    }

    /// True when `html` has an inline event handler attribute (` onclick=`).
    fn has_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(i, _)| {
            let rest = &html[i + 3..];
            let name = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            name > 0 && rest[name..].starts_with('=')
        })
    }

    #[test]
    fn no_file_has_inline_script_or_another_origin() {
        let index = FILES[0].2;
        assert!(!index.contains("<script>"), "no inline script");
        assert!(!has_handler(index), "no inline handler attribute");
        assert!(has_handler("<a onclick=x>"));
        for (name, _, body) in FILES {
            assert!(!body.contains("innerHTML"), "{name} writes HTML");
            assert!(
                !body.contains("insertAdjacentHTML") && !body.contains("eval("),
                "{name}"
            );
            let other_origin = body.contains("http://") || body.contains("https://");
            // The SVG names its XML namespace, which is no request.
            assert!(
                !other_origin || name.ends_with(".svg") || *name == "dom.js",
                "{name} names another origin"
            );
        }
    }
}
