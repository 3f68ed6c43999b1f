//! The chat page of `web/` (HTML, CSS and JavaScript modules, no build
//! step), served under `/ui/` when `web.enabled` is set.
//!
//! The files are compiled into the binary (`include_bytes!`), so the
//! `FROM scratch` image serves them with no file system, and a page is
//! always the one its gateway was built with. Every answer carries a strict
//! Content-Security-Policy (this origin only: no inline script or style, no
//! framing), `x-content-type-options: nosniff`, and `cache-control:
//! no-cache` with an `ETag`, so a browser revalidates (a `304` when the
//! gateway is the same build) instead of running a stale script against a
//! newer gateway.

use axum::{
    Router,
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
    routing::get,
};

/// Where the page is mounted.
pub const PREFIX: &str = "/ui";

/// This origin only: the page's own modules and styles, calls to the
/// gateway it came from, nothing inline, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// One file of `web/`.
struct Asset {
    /// Its path under `web/` (and under `/ui/`).
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    /// A strong validator: a hash of the bytes, computed at compile time.
    etag: &'static str,
}

/// FNV-1a, 64 bits: the ETag of a file (a change detector, not a MAC).
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// The hash as a quoted ETag, `"` + 16 hex digits + `"`, in a const.
const fn etag_bytes(hash: u64) -> [u8; 18] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'"'; 18];
    let mut i = 0;
    while i < 16 {
        out[1 + i] = HEX[((hash >> (60 - 4 * i)) & 0xf) as usize];
        i += 1;
    }
    out
}

/// An [`Asset`] for `web/$path`, embedded at compile time.
macro_rules! asset {
    ($path:literal, $content_type:literal) => {{
        const BYTES: &[u8] =
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/", $path));
        const ETAG: [u8; 18] = etag_bytes(fnv1a(BYTES));
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: BYTES,
            etag: match std::str::from_utf8(&ETAG) {
                Ok(etag) => etag,
                Err(_) => panic!("an ETag is ASCII"),
            },
        }
    }};
}

/// Every file of `web/` (a test checks that none is missing).
static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("js/app.js", "text/javascript; charset=utf-8"),
    asset!("js/card.js", "text/javascript; charset=utf-8"),
    asset!("js/connect.js", "text/javascript; charset=utf-8"),
    asset!("js/details.js", "text/javascript; charset=utf-8"),
    asset!("js/dom.js", "text/javascript; charset=utf-8"),
    asset!("js/prompts.js", "text/javascript; charset=utf-8"),
    asset!("js/session.js", "text/javascript; charset=utf-8"),
    asset!("js/turn.js", "text/javascript; charset=utf-8"),
];

/// The routes of the page: `/ui` (a redirect to `/ui/`), `/ui/` (the
/// page) and `/ui/{path}` (its files); any other path under `/ui/` is 404.
pub fn routes() -> Router {
    Router::new()
        .route(PREFIX, get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move { serve(&path, &headers) }),
        )
}

/// The headers every answer of the page carries, found or not.
fn protect(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// The file at `path` under `web/`, `304` when the client's copy is this one.
fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.path == path) else {
        let mut response = (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "not found\n",
        )
            .into_response();
        protect(&mut response);
        return response;
    };
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == asset.etag
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    response
        .headers_mut()
        .insert(header::ETAG, HeaderValue::from_static(asset.etag));
    protect(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(path: &str, headers: &[(&str, &str)]) -> Response {
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        routes()
            .oneshot(request.body(Body::empty()).expect("a request"))
            .await
            .expect("the router answers")
    }

    async fn body(response: Response) -> Vec<u8> {
        to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body")
            .to_vec()
    }

    fn header<'a>(response: &'a Response, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .expect("an ASCII header")
    }

    /// The files of `web/`, as paths relative to it.
    fn web_files() -> Vec<String> {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("web/ is readable") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    let relative = path.strip_prefix(root).expect("under web/");
                    out.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut files = Vec::new();
        walk(&root, &root, &mut files);
        files.sort();
        files
    }

    #[tokio::test]
    async fn the_page_is_served_at_ui_slash_with_its_security_headers() {
        let response = get("/ui/", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, "content-type"),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            header(&response, "content-security-policy"),
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        assert_eq!(header(&response, "cache-control"), "no-cache");
        let html = String::from_utf8(body(response).await).expect("UTF-8");
        assert!(html.contains(r#"<script type="module" src="js/app.js">"#));
    }

    #[tokio::test]
    async fn ui_without_a_slash_redirects_to_the_page() {
        let response = get("/ui", &[]).await;
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(header(&response, "location"), "/ui/");
    }

    #[tokio::test]
    async fn every_file_has_its_content_type() {
        for (path, content_type) in [
            ("/ui/index.html", "text/html; charset=utf-8"),
            ("/ui/style.css", "text/css; charset=utf-8"),
            ("/ui/js/connect.js", "text/javascript; charset=utf-8"),
            ("/ui/favicon.svg", "image/svg+xml"),
        ] {
            let response = get(path, &[]).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(header(&response, "content-type"), content_type, "{path}");
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        }
    }

    #[tokio::test]
    async fn unknown_paths_are_not_found_and_nothing_outside_web_is_reachable() {
        for path in [
            "/ui/nope.js",
            "/ui/js/",
            "/ui/../Cargo.toml",
            "/ui/%2e%2e/Cargo.toml",
            "/ui/js/../../Cargo.toml",
            "/ui/JS/APP.JS",
        ] {
            let response = get(path, &[]).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            assert_eq!(
                header(&response, "content-security-policy"),
                CONTENT_SECURITY_POLICY
            );
        }
    }

    #[tokio::test]
    async fn a_copy_the_browser_has_is_not_sent_again() {
        let first = get("/ui/js/app.js", &[]).await;
        let etag = header(&first, "etag").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18);
        let again = get("/ui/js/app.js", &[("if-none-match", &etag)]).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(body(again).await.is_empty());
        let other = get(
            "/ui/js/app.js",
            &[("if-none-match", "\"0000000000000000\"")],
        )
        .await;
        assert_eq!(other.status(), StatusCode::OK);
    }

    #[test]
    fn every_file_of_web_is_served_and_every_served_file_exists() {
        let mut served: Vec<String> = ASSETS.iter().map(|asset| asset.path.to_owned()).collect();
        served.sort();
        assert_eq!(
            served,
            web_files(),
            "ASSETS in src/web/page.rs and the files of web/ differ"
        );
    }

    #[test]
    fn the_etag_is_the_hash_in_hex() {
        assert_eq!(
            std::str::from_utf8(&etag_bytes(0x0123_4567_89ab_cdef)).expect("ASCII"),
            "\"0123456789abcdef\""
        );
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
    }
}
