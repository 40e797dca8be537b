use crate::tools::web::extract::{Kind, readable};

/// A news article as sites serve it: head scripts and styles, navigation, a sidebar, the article,
/// a footer and trailing scripts.
pub(crate) fn article_page() -> String {
    let mut s = String::from(
        r#"<!DOCTYPE html>
<html lang="en"><head>
<meta charset="utf-8"><title>The Quiet Harbour | Daily Gazette</title>
<meta property="og:title" content="The Quiet Harbour">
<script>window.tracker = "SCRIPTMARKER"; function track(){}</script>
<style>.nav { color: red } /* STYLEMARKER */</style>
</head><body>
<header class="site-header"><nav class="main-nav"><ul>
<li><a href="/">Home</a></li><li><a href="/world">World NAVMARKER</a></li><li><a href="/sport">Sport</a></li>
</ul></nav></header>
<div class="layout">
<aside id="sidebar" class="sidebar widget"><h3>Trending</h3><ul>
<li><a href="/t/1">SIDEBARMARKER celebrity news</a></li><li><a href="/t/2">Ten tricks</a></li>
</ul></aside>
<main><article class="post">
<h1>The Quiet Harbour</h1>
<p class="byline">By Ann Writer, 3 March 2024</p>
"#,
    );
    for i in 0..12 {
        s.push_str(&format!(
            "<p>Paragraph {i}. The fishing boats came in at dawn, and the harbour master counted them one by one, writing each name in the ledger as his father had done before him. The tide was low, the gulls were loud, and the ARTICLEMARKER nets were heavy with herring.</p>\n"
        ));
    }
    s.push_str(
        r#"<p>Read more on <a href="/harbours">our harbours page</a>.</p>
</article></main></div>
<footer class="site-footer"><p>FOOTERMARKER © 2024 Daily Gazette. <a href="/privacy">Privacy</a> · <a href="/terms">Terms</a></p></footer>
<script>console.log("SCRIPTMARKER2")</script>
</body></html>"#,
    );
    s
}

#[test]
fn an_article_keeps_its_content_and_title_and_loses_the_chrome() {
    let r = readable(&article_page(), "https://gazette.example/harbour");
    assert!(r.title.contains("The Quiet Harbour"), "{r:?}");
    assert!(
        r.text.contains("Paragraph 0. The fishing boats"),
        "{}",
        r.text
    );
    assert!(r.text.contains("Paragraph 11."), "{}", r.text);
    assert_eq!(r.text.matches("ARTICLEMARKER").count(), 12);
    for gone in [
        "SCRIPTMARKER",
        "STYLEMARKER",
        "NAVMARKER",
        "SIDEBARMARKER",
        "FOOTERMARKER",
        "function track",
    ] {
        assert!(
            !r.text.contains(gone),
            "{gone} must be removed:\n{}",
            r.text
        );
    }
    assert!(
        r.text.contains("(https://gazette.example/harbours)"),
        "links are kept, made absolute:\n{}",
        r.text
    );
}

#[test]
fn a_page_with_no_content_keeps_its_title() {
    let r = readable(
        "<html><head><title>Empty</title></head><body></body></html>",
        "https://x.example/",
    );
    assert_eq!(r.title, "Empty");
    assert!(r.text.is_empty(), "{r:?}");
}

#[test]
fn content_types_are_judged_by_their_mime_type() {
    for (ct, kind) in [
        (Some("text/html"), Kind::Html),
        (Some("text/html; charset=ISO-8859-1"), Kind::Html),
        (Some("TEXT/HTML"), Kind::Html),
        (Some("application/xhtml+xml"), Kind::Html),
        (Some("text/plain; charset=utf-8"), Kind::Text),
        (Some("text/markdown"), Kind::Text),
        (Some("text/csv"), Kind::Text),
        (Some("application/json"), Kind::Text),
        (Some("application/ld+json"), Kind::Text),
        (Some("application/rss+xml"), Kind::Text),
        (Some("application/xml"), Kind::Text),
        (Some("application/javascript"), Kind::Text),
        (Some("image/png"), Kind::Binary),
        (Some("image/svg+xml"), Kind::Binary),
        (Some("application/pdf"), Kind::Binary),
        (Some("application/octet-stream"), Kind::Binary),
        (Some("application/zip"), Kind::Binary),
        (Some("video/mp4"), Kind::Binary),
        (Some("font/woff2"), Kind::Binary),
        (Some(""), Kind::Unknown),
        (None, Kind::Unknown),
    ] {
        assert_eq!(Kind::of(ct), kind, "{ct:?}");
    }
}

#[test]
fn an_untyped_body_is_sniffed() {
    assert_eq!(Kind::sniff(b"  <!DOCTYPE html><html>", false), Kind::Html);
    assert_eq!(Kind::sniff(b"<HTML><body>x", false), Kind::Html);
    assert_eq!(Kind::sniff(b"{\"a\": 1}", false), Kind::Text);
    assert_eq!(Kind::sniff(b"\x89PNG\r\n\x1a\n\0\0\0", false), Kind::Binary);
    assert_eq!(Kind::sniff(&[0xff, 0xfe, 0x41], false), Kind::Binary);
    // A multi-byte char split by the size cap is not binary.
    assert_eq!(
        Kind::sniff("café".as_bytes()[..4].as_ref(), true),
        Kind::Text
    );
    assert_eq!(
        Kind::sniff("café".as_bytes()[..4].as_ref(), false),
        Kind::Binary
    );
}

#[test]
fn a_deeply_nested_page_is_not_handed_to_the_extractor() {
    // html5ever and readability are quadratic in nesting depth: 64,000 levels took minutes.
    let html = format!(
        "<!DOCTYPE html><html><head><title>Deep</title></head><body>{}<p>hidden words</p></body></html>",
        "<div>".repeat(3000)
    );
    let r = readable(&html, "https://deep.example/");
    assert!(
        r.text.contains("not extracted") && r.text.contains("nested more than"),
        "{r:?}"
    );
}

#[test]
fn misnested_formatting_elements_cannot_multiply_the_page() {
    // Each `</div>` leaves its `<b>` on the list of active formatting elements, and every later
    // `<b>` re-creates all of them: 1,000 cycles (21 KB) would build half a million elements.
    let mut body = String::new();
    for i in 0..1000 {
        body.push_str(&format!("<div><b id={i}></div>"));
    }
    let html = format!("<html><head><title>Fmt</title></head><body>{body}</body></html>");
    let r = readable(&html, "https://fmt.example/");
    assert!(
        r.text.contains("not extracted") && r.text.contains("elements"),
        "{r:?}"
    );
}

#[test]
fn the_shape_check_passes_real_pages_and_counts_what_it_sees() {
    use crate::tools::web::shape::{self, TooComplex};
    // The counts alone are judged here: no time budget, so a loaded machine cannot flake it.
    let check = |html: &str| shape::check_within(html, std::time::Duration::MAX);
    assert_eq!(check(&article_page()), Ok(()));
    let nested = format!("<body>{}", "<span>".repeat(shape::MAX_DEPTH + 10));
    assert_eq!(check(&nested), Err(TooComplex::Depth));
    let flat = "<i></i>".repeat(shape::MAX_ELEMENTS + 1);
    assert_eq!(check(&flat), Err(TooComplex::Elements));
    // Unclosed custom elements and <rt>s nest like divs.
    for tag in ["<x-a>", "<rt>", "<optgroup>", "<svg><td>"] {
        let html = format!("<body>{}", tag.repeat(shape::MAX_DEPTH + 10));
        assert_eq!(check(&html), Err(TooComplex::Depth), "{tag}");
    }
}
