//! The dashboard at `/`: one hand-written page (HTML, CSS and vanilla JavaScript modules,
//! no build step, nothing fetched from elsewhere) that reads the JSON API and shows the
//! fleet, each cluster, and what-ifs (`/api/v1/what-if`, read only too). The assets are compiled into the binary, so the page works
//! offline and always matches the hub that serves it.
//!
//! Every response says `Cache-Control: no-cache` (a new hub's page is never mixed with an
//! old script) and carries a strict Content-Security-Policy: scripts, styles and fetches
//! from this origin only, no inline script or style, no frames. The page builds its DOM
//! with `textContent`, never `innerHTML`, so cluster and pod names cannot inject markup.
//! With sharding, the page links to the other replicas' dashboards: links a person follows,
//! never fetches, so `connect-src 'self'` stays as it is.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

/// Where the assets are served from (the page itself is at `/`).
const PREFIX: &str = "/dashboard/";

/// Self only: no inline code, no other origin, no frames, no plugins, no forms.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self'; connect-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_bytes!("index.html"),
};

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("style.css"),
    },
    Asset {
        name: "app.js",
        content_type: JS,
        body: include_bytes!("app.js"),
    },
    Asset {
        name: "dom.js",
        content_type: JS,
        body: include_bytes!("dom.js"),
    },
    Asset {
        name: "fleet.js",
        content_type: JS,
        body: include_bytes!("fleet.js"),
    },
    Asset {
        name: "cluster.js",
        content_type: JS,
        body: include_bytes!("cluster.js"),
    },
    Asset {
        name: "sharding.js",
        content_type: JS,
        body: include_bytes!("sharding.js"),
    },
    Asset {
        name: "what-if.js",
        content_type: JS,
        body: include_bytes!("what-if.js"),
    },
    Asset {
        name: "what-if-answer.js",
        content_type: JS,
        body: include_bytes!("what-if-answer.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("favicon.svg"),
    },
];

/// Whether `path` is the dashboard's: the page and its assets, which hold no data of the
/// fleet (the page reads that from the API). Authorization checks them all as one.
pub(super) fn is_dashboard(path: &str) -> bool {
    matches!(path, "/" | "/index.html" | "/favicon.ico") || path.starts_with(PREFIX)
}

/// The response for `path` if it is the dashboard's, else `None` (the API's routes follow).
/// The page is at `/` (the cluster pages are `/#/clusters/<name>` and the what-if page
/// `/#/what-if?<query>`, so the same page serves them and the browser's history works); its
/// assets are under `/dashboard/`.
pub(super) fn route(path: &str) -> Option<Response<Full<Bytes>>> {
    if path == "/" || path == "/index.html" {
        return Some(respond(StatusCode::OK, &INDEX));
    }
    if path == "/favicon.ico" {
        return ASSETS
            .iter()
            .find(|a| a.name == "favicon.svg")
            .map(|a| respond(StatusCode::OK, a));
    }
    let name = path.strip_prefix(PREFIX)?;
    Some(match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => respond(StatusCode::OK, asset),
        None => respond(
            StatusCode::NOT_FOUND,
            &Asset {
                name: "",
                content_type: "text/plain; charset=utf-8",
                body: b"no such dashboard asset\n",
            },
        ),
    })
}

fn respond(status: StatusCode, asset: &Asset) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(asset.body)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

#[cfg(test)]
mod tests;
