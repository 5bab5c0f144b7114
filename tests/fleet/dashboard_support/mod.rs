//! What the dashboard's browser tests share: finding Chromium (a missing one fails the test
//! and says how to install it), loading a page and dumping its DOM once its scripts ran,
//! reading what a person sees in that markup, the hub's HTTP server on a free port, and the
//! DevTools-protocol driver (`cdp`). Each test crate includes `e2e_support` beside it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cdp;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::e2e_support::{Hub, TempDir};

pub const BROWSER_LIMIT: Duration = Duration::from_secs(90);
/// The longest one step of a DevTools-driven test may take.
pub const STEP: Duration = Duration::from_secs(20);
/// What a page shows, for a failure's message.
pub const PAGE: &str = "document.body.innerText";

/// The browser to drive: `FLEETSCALER_CHROMIUM`, else `chromium` (Debian) or
/// `chromium-browser` on the PATH.
pub fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("FLEETSCALER_CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the dashboard's tests need headless Chromium and found none on the PATH: install it \
         with `apt-get install chromium` (scripts/test.sh does so when CI=true), or set \
         FLEETSCALER_CHROMIUM to a Chromium or Chrome binary"
    );
}

/// The page's DOM after its scripts ran and fetched the API (`--dump-dom`).
pub async fn dump_dom(url: &str) -> String {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || dump_dom_blocking(&url))
        .await
        .unwrap()
}

fn dump_dom_blocking(url: &str) -> String {
    let profile = TempDir::new("dashboard-chromium");
    let mut child = Command::new(chromium())
        .args(cdp::HEADLESS)
        .args([
            // Virtual time runs the page's timers without waiting; fetches still complete.
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium().display()));
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            panic!("chromium did not finish loading {url} within {BROWSER_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium failed on {url} ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// The part of `html` from the first `start` to the next `end` after it (both included).
pub fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in the page:\n{html}"));
    let len = html[from..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end:?} after {start:?}"));
    &html[from..from + len + end.len()]
}

/// The rows of a table's body, as markup (each from just after its `<tr ...>`).
pub fn body_rows(table: &str) -> Vec<&str> {
    let body = between(table, "<tbody", "</tbody>");
    body.split("<tr")
        .skip(1)
        .filter_map(|r| r.split_once('>').map(|(_, rest)| rest))
        .collect()
}

/// What a person reads in a piece of markup: tags dropped, entities decoded, spaces
/// collapsed.
pub fn text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The hub's HTTP server on a free port: its address, its base URL, and the token that
/// stops it.
pub async fn serve(hub: &Hub) -> (SocketAddr, String, CancellationToken) {
    let (addr, token) = crate::e2e_support::serve_http(hub).await;
    (addr, format!("http://{addr}"), token)
}

/// Waits for the page's next successful poll (its "Updated" time changes).
pub fn next_refresh(b: &mut cdp::Browser) {
    let updated = b.eval("document.getElementById('refresh-time').textContent");
    let refreshed = format!(
        "document.getElementById('refresh-time').textContent !== {updated} \
         && !document.body.classList.contains('stale')"
    );
    b.wait_for(STEP, "a refresh", &refreshed, PAGE);
}
