//! Just enough of the Chrome DevTools protocol to drive a page like a person: headless
//! Chromium with a debugging port, one page's websocket (a minimal RFC 6455 client over a
//! `TcpStream`: masked text frames out, whole messages in), commands by id, and
//! `Runtime.evaluate` to read what the page shows. Blocking; run it off the async runtime.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct Browser {
    child: Child,
    socket: TcpStream,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the tests start Chromium: headless, no sandbox (root in CI), and none of the
/// background connections a closed network refuses.
pub const HEADLESS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
];

impl Browser {
    /// Starts `chromium` headless on about:blank and connects to its page.
    pub fn start(chromium: &Path, profile: &Path) -> Browser {
        let mut child = Command::new(chromium)
            .args(HEADLESS)
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
        let port = devtools_port(&mut child);
        let page = page_path(port);
        let socket = handshake(port, &page);
        Browser {
            child,
            socket,
            next_id: 0,
        }
    }

    /// Sends a command and returns its result (events in between are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params)
            .unwrap_or_else(|error| panic!("{method} failed: {error}"))
    }

    /// A command's result, or the protocol's error.
    fn send(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"id": id, "method": method, "params": params}).to_string();
        send_text(&mut self.socket, message.as_bytes());
        loop {
            let reply: Value = serde_json::from_slice(&read_message(&mut self.socket)).unwrap();
            if reply["id"] != id {
                continue;
            }
            if let Some(error) = reply.get("error") {
                return Err(error.clone());
            }
            return Ok(reply["result"].clone());
        }
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("{expression} threw: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Whether `expression` is true in the page. A page being left for another document (a
    /// link followed) has nothing to evaluate in until the next one commits: not yet true.
    fn holds(&mut self, expression: &str) -> bool {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        match self.send("Runtime.evaluate", params) {
            Ok(r) if r.get("exceptionDetails").is_some() => {
                panic!("{expression} threw: {}", r["exceptionDetails"])
            }
            Ok(r) => r["result"]["value"] == Value::Bool(true),
            Err(e) if leaving(&e) => false,
            Err(e) => panic!("Runtime.evaluate failed: {e}"),
        }
    }

    /// Waits until `expression` is true in the page; panics with `what` and `show` (an
    /// expression describing the page) after `limit`.
    pub fn wait_for(&mut self, limit: Duration, what: &str, expression: &str, show: &str) {
        let started = Instant::now();
        while !self.holds(expression) {
            if started.elapsed() > limit {
                panic!(
                    "timed out after {limit:?} waiting for {what}: {}",
                    self.eval(show)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
    }

    /// A key pressed and released, as the keyboard sends it (`text` for keys that type,
    /// such as Enter's "\r").
    pub fn press(&mut self, key: &str, code: u32, text: Option<&str>) {
        let mut down = json!({"type": "rawKeyDown", "key": key, "code": key,
                              "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code});
        if let Some(text) = text {
            down["type"] = json!("keyDown");
            down["text"] = json!(text);
            down["unmodifiedText"] = json!(text);
        }
        self.call("Input.dispatchKeyEvent", down.clone());
        down["type"] = json!("keyUp");
        self.call("Input.dispatchKeyEvent", down);
    }

    /// The browser's back button: the previous entry of the tab's history.
    pub fn back(&mut self) {
        let history = self.call("Page.getNavigationHistory", json!({}));
        let current = history["currentIndex"].as_u64().unwrap() as usize;
        assert!(current > 0, "no page to go back to: {history}");
        let entry = history["entries"][current - 1]["id"].clone();
        self.call("Page.navigateToHistoryEntry", json!({"entryId": entry}));
    }
}

/// DevTools' errors for an evaluation asked while the page navigates to another document.
fn leaving(error: &Value) -> bool {
    let message = error["message"].as_str().unwrap_or_default();
    [
        "navigated or closed",
        "context was destroyed",
        "Cannot find context",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Reads Chromium's stderr until it says where DevTools listens.
fn devtools_port(child: &mut Child) -> u16 {
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let started = Instant::now();
    let port = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("chromium exited before DevTools listened"))
            .unwrap();
        if let Some(rest) = line.split("DevTools listening on ws://").nth(1) {
            let port = rest.split('/').next().unwrap().rsplit(':').next().unwrap();
            break port.parse().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no DevTools port"
        );
    };
    // Keep draining so Chromium never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    port
}

/// The websocket path of the browser's page, from `/json/list` (asked again until the
/// page is listed).
fn page_path(port: u16) -> String {
    let started = Instant::now();
    loop {
        let targets = get_json(port, "/json/list");
        let page = targets.as_array().and_then(|list| {
            list.iter()
                .find(|t| t["type"] == "page" && t["url"] == "about:blank")
        });
        if let Some(url) = page.and_then(|p| p["webSocketDebuggerUrl"].as_str()) {
            return format!("/{}", url.splitn(4, '/').nth(3).unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no page target: {targets}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A GET of the DevTools HTTP endpoint (it keeps the connection open: read by length).
fn get_json(port: u16, path: &str) -> Value {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(tcp, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").unwrap();
    let head = read_head(&mut tcp);
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("no Content-Length from DevTools: {head}"));
    let mut body = vec![0u8; length];
    tcp.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// Response headers, read byte by byte so nothing after them is consumed.
fn read_head(tcp: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn handshake(port: u16, path: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let head = read_head(&mut tcp);
    assert!(head.starts_with("HTTP/1.1 101"), "no websocket: {head}");
    tcp
}

/// One masked text frame (clients must mask).
fn send_text(tcp: &mut TcpStream, payload: &[u8]) {
    let mask = [0x5a, 0x17, 0xc3, 0x81];
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    tcp.write_all(&frame).unwrap();
}

/// One whole message (continuation frames joined); control frames are skipped.
fn read_message(tcp: &mut TcpStream) -> Vec<u8> {
    let mut message = Vec::new();
    loop {
        let mut head = [0u8; 2];
        tcp.read_exact(&mut head).unwrap();
        let fin = head[0] & 0x80 != 0;
        let opcode = head[0] & 0x0f;
        let len = match head[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                tcp.read_exact(&mut b).unwrap();
                u16::from_be_bytes(b) as usize
            }
            127 => {
                let mut b = [0u8; 8];
                tcp.read_exact(&mut b).unwrap();
                u64::from_be_bytes(b) as usize
            }
            n => n as usize,
        };
        assert_eq!(head[1] & 0x80, 0, "servers do not mask");
        let mut payload = vec![0u8; len];
        tcp.read_exact(&mut payload).unwrap();
        match opcode {
            0x8 => panic!("DevTools closed the websocket"),
            0x9 | 0xa => continue,
            _ => message.extend_from_slice(&payload),
        }
        if fin {
            return message;
        }
    }
}
