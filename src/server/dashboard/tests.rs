use http_body_util::BodyExt;

use super::*;

async fn get(path: &str) -> (StatusCode, http::HeaderMap, String) {
    let r = route(path).unwrap_or_else(|| panic!("{path} is not the dashboard's"));
    let (parts, body) = r.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

fn header(headers: &http::HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

fn assert_guarded(path: &str, headers: &http::HeaderMap) {
    assert_eq!(header(headers, header::CACHE_CONTROL), "no-cache", "{path}");
    assert_eq!(
        header(headers, header::X_CONTENT_TYPE_OPTIONS),
        "nosniff",
        "{path}"
    );
    let csp = header(headers, header::CONTENT_SECURITY_POLICY);
    assert!(csp.starts_with("default-src 'none';"), "{path}: {csp}");
    assert!(csp.contains("script-src 'self';"), "{path}: {csp}");
    assert!(csp.contains("connect-src 'self';"), "{path}: {csp}");
    assert!(!csp.contains("unsafe"), "{path}: {csp}");
}

#[tokio::test]
async fn the_page_is_served_at_the_root_with_its_headers() {
    for path in ["/", "/index.html"] {
        let (status, headers, body) = get(path).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            header(&headers, header::CONTENT_TYPE),
            "text/html; charset=utf-8"
        );
        assert_guarded(path, &headers);
        assert!(body.starts_with("<!doctype html>"), "{body}");
    }
}

#[tokio::test]
async fn every_asset_has_its_content_type_and_headers() {
    let expected = [
        ("style.css", "text/css; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("dom.js", "text/javascript; charset=utf-8"),
        ("fleet.js", "text/javascript; charset=utf-8"),
        ("cluster.js", "text/javascript; charset=utf-8"),
        ("sharding.js", "text/javascript; charset=utf-8"),
        ("what-if.js", "text/javascript; charset=utf-8"),
        ("what-if-answer.js", "text/javascript; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ];
    assert_eq!(ASSETS.len(), expected.len());
    for (name, content_type) in expected {
        let path = format!("/dashboard/{name}");
        let (status, headers, body) = get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(
            header(&headers, header::CONTENT_TYPE),
            content_type,
            "{path}"
        );
        assert_guarded(&path, &headers);
        assert!(!body.is_empty(), "{path}");
    }
    let (status, headers, _) = get("/favicon.ico").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, header::CONTENT_TYPE), "image/svg+xml");
}

#[tokio::test]
async fn unknown_assets_are_not_found() {
    for path in [
        "/dashboard/",
        "/dashboard/nope.js",
        "/dashboard/../src/main.rs",
        "/dashboard/app.js/",
    ] {
        let (status, headers, body) = get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(
            header(&headers, header::CONTENT_TYPE),
            "text/plain; charset=utf-8"
        );
        assert_guarded(path, &headers);
        assert!(body.contains("no such dashboard asset"), "{body}");
    }
}

#[test]
fn other_paths_are_left_to_the_api() {
    for path in [
        "/api/v1/fleet",
        "/api/v1/clusters/sim-1",
        "/api/v1/what-if",
        "/healthz",
        "/dashboard",
        "/clusters/sim-1",
        "",
    ] {
        assert!(route(path).is_none(), "{path}");
    }
}

fn text(asset: &Asset) -> &'static str {
    std::str::from_utf8(asset.body).unwrap()
}

/// `attr="value"` values in `html`.
fn values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!("{attr}=\"");
    html.match_indices(&needle)
        .filter_map(|(i, _)| html[i + needle.len()..].split('"').next())
        .collect()
}

#[test]
fn the_page_loads_only_its_own_assets_and_no_inline_code() {
    let html = text(&INDEX);
    let linked: Vec<&str> = values(html, "src")
        .into_iter()
        .chain(values(html, "href"))
        .filter(|v| v.starts_with('/') && !v.starts_with("/api/"))
        .collect();
    assert!(linked.len() >= 3, "{linked:?}");
    for path in linked {
        assert_eq!(
            status(path),
            StatusCode::OK,
            "{path} is linked but not served"
        );
    }
    // Every script is a file (the CSP would block an inline one anyway).
    assert_eq!(
        html.matches("<script").count(),
        html.matches("<script type=\"module\" src=").count()
    );
    assert!(
        !html.contains(" style="),
        "inline styles are blocked by the CSP"
    );
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing from elsewhere"
    );
}

fn status(path: &str) -> StatusCode {
    route(path).map_or(StatusCode::NOT_FOUND, |r| r.status())
}

#[test]
fn scripts_import_only_served_modules_and_never_write_markup() {
    for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
        let js = text(asset);
        for import in js
            .match_indices("from \"./")
            .filter_map(|(i, _)| js[i + 8..].split('"').next())
        {
            assert!(
                ASSETS.iter().any(|a| a.name == import),
                "{} imports {import}, which is not served",
                asset.name
            );
        }
        // Data goes in as text: these would parse it as markup or code.
        // The SVG namespace is a name, not an address the page fetches.
        let js = js.replace("http://www.w3.org/2000/svg", "");
        for banned in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "http://",
            "https://",
        ] {
            assert!(!js.contains(banned), "{} contains {banned}", asset.name);
        }
    }
}

/// `import {a, b} from "./x.js"` statements of `js`: the names and the module.
fn imports(js: &str) -> Vec<(Vec<&str>, &str)> {
    js.split("import {")
        .skip(1)
        .filter_map(|rest| {
            let (names, after) = rest.split_once('}')?;
            let module = after
                .trim_start()
                .strip_prefix("from \"./")?
                .split('"')
                .next()?;
            let names = names.split(',').map(str::trim).filter(|n| !n.is_empty());
            Some((names.collect(), module))
        })
        .collect()
}

#[test]
fn every_imported_name_is_exported_by_its_module() {
    // A name a module does not export fails the page at load, before anything is shown.
    let mut checked = 0;
    for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
        for (names, module) in imports(text(asset)) {
            let source = ASSETS
                .iter()
                .find(|a| a.name == module)
                .map(text)
                .unwrap_or_else(|| panic!("{} imports {module}, which is not served", asset.name));
            for name in names {
                let exported = ["function", "async function", "const", "let"]
                    .iter()
                    .any(|kind| {
                        let head = format!("export {kind} {name}");
                        source.match_indices(&head).any(|(i, _)| {
                            matches!(source[i + head.len()..].chars().next(), Some('(' | ' '))
                        })
                    });
                assert!(
                    exported,
                    "{} imports {name} from {module}, which does not export it",
                    asset.name
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} imports found: is the parsing right?"
    );
}
