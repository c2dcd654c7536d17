//! `GET /dashboard`: the live dashboard, a page and its script embedded in the binary (no
//! CDN, no library), which polls `/admin/latency`, `/admin/slo`, `/admin/usage` and
//! `/metrics` (an admin token, when set, goes in the page's address: `#token=...`).

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");

/// `GET /dashboard`.
pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
}

/// `GET /dashboard/app.js`.
pub async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
}
