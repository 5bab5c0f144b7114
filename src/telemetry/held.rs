//! Where the text logs and the console's messages go: stderr, except while the demo's live
//! view holds the terminal. The view redraws its block by moving the cursor up as many rows
//! as it drew; a line written between two redraws by anyone else would shift the block, so
//! that the next redraw leaves the old header behind and erases the line. While held, lines
//! wait here and the view prints them above its block.

use std::io::Write;
use std::sync::{Mutex, MutexGuard};

use tracing_subscriber::fmt::MakeWriter;

/// `Some` while held: the lines written since the view last took them.
static HELD: Mutex<Option<String>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<String>> {
    // A panic while holding the lock leaves text only: nothing to repair.
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Lines are kept for the caller until [`release`].
pub fn hold() {
    held().get_or_insert_with(String::new);
}

/// The lines written since the last call (empty when not held).
pub fn take() -> String {
    held().as_mut().map(std::mem::take).unwrap_or_default()
}

/// Back to stderr, with the lines still waiting.
pub fn release() {
    let rest = held().take();
    if let Some(rest) = rest {
        let _ = std::io::stderr().write_all(rest.as_bytes());
    }
}

/// Writes `text` (whole lines) where lines go now.
pub fn write(text: &[u8]) {
    let mut held = held();
    match held.as_mut() {
        Some(buffer) => buffer.push_str(&String::from_utf8_lossy(text)),
        None => {
            drop(held);
            let _ = std::io::stderr().write_all(text);
        }
    }
}

/// The text log layer's writer: one event's line, written whole when the layer is done.
pub struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

pub struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            write(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lines_wait_for_the_view_and_go_to_stderr_when_released() {
        // The only test that holds this process-wide state (another test's log line could
        // land in it meanwhile: the checks allow for that).
        hold();
        write(b"one\n");
        let mut line = Stderr.make_writer();
        line.write_all(b"two").unwrap();
        line.write_all(b"\n").unwrap();
        drop(line);
        assert!(take().contains("one\ntwo\n"));
        assert!(!take().contains("one"));
        write(b"three\n");
        release();
        assert!(held().is_none());
        assert_eq!(take(), "");
    }
}
