//! Text fitted to a terminal's columns. The demo's live view redraws its block in place by
//! moving the cursor up as many rows as it drew last time, which is right only if no line it
//! drew was wrapped by the terminal: so every line is cut (or wrapped here) to the width,
//! counted as the terminal counts it: display columns (a CJK character takes two, a
//! combining mark none), escape sequences none.

use std::borrow::Cow;

use unicode_width::UnicodeWidthChar;

const ESC: char = '\x1b';
const ELLIPSIS: char = '…';

/// Outside text (an API server's error, a node's name) with its control characters made
/// harmless: a newline or a tab would take rows or columns the view does not count, and an
/// escape sequence from a cluster could move the cursor or recolour the terminal.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let clean = text
        .chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() => char::REPLACEMENT_CHARACTER,
            c => c,
        })
        .collect();
    Cow::Owned(clean)
}

/// The columns `text` takes on a terminal.
pub fn width(text: &str) -> usize {
    pieces(text).map(|p| p.width()).sum()
}

/// `text` cut to at most `max` columns, ending in "…" when something was cut. Escape
/// sequences are kept, those after the cut too (a colour is still reset).
pub fn fit(text: &str, max: usize) -> Cow<'_, str> {
    if width(text) <= max {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max * 4 + 8));
    // One column is kept for the ellipsis; with no column at all there is none.
    let room = max.saturating_sub(1);
    let (mut used, mut cut) = (0, false);
    for piece in pieces(text) {
        match piece {
            Piece::Escape(seq) => out.push_str(seq),
            Piece::Char(_) if cut => {}
            Piece::Char(c) => {
                let w = c.width().unwrap_or(0);
                if used + w > room {
                    cut = true;
                    if max > 0 {
                        out.push(ELLIPSIS);
                    }
                } else {
                    out.push(c);
                    used += w;
                }
            }
        }
    }
    Cow::Owned(out)
}

/// Plain `text` (no escapes: [`sanitize`]d) in rows of at most `max` columns, broken between
/// words where it can be; rows after the first start with `indent` spaces. At most `rows`
/// rows: the last ends in "…" when there was more.
pub fn wrap(text: &str, max: usize, indent: usize, rows: usize) -> Vec<String> {
    if width(text) <= max || max <= indent + 1 || rows <= 1 {
        return vec![fit(text, max).into_owned()];
    }
    let mut wrapper = Wrapper {
        rows: Vec::new(),
        row: String::new(),
        used: 0,
        max,
        indent,
    };
    for word in text.split(' ') {
        wrapper.word(word);
    }
    let mut out = wrapper.finish();
    if out.len() > rows {
        out.truncate(rows);
        if let Some(last) = out.last_mut() {
            while width(last) + 1 > max {
                last.pop();
            }
            last.push(ELLIPSIS);
        }
    }
    out
}

struct Wrapper {
    rows: Vec<String>,
    row: String,
    used: usize,
    max: usize,
    indent: usize,
}

impl Wrapper {
    /// Whether the current row has text (not just its indent).
    fn started(&self) -> bool {
        self.used > if self.rows.is_empty() { 0 } else { self.indent }
    }

    fn new_row(&mut self) {
        self.rows.push(std::mem::take(&mut self.row));
        self.row = " ".repeat(self.indent);
        self.used = self.indent;
    }

    fn word(&mut self, word: &str) {
        let w = width(word);
        if self.started() && self.used + 1 + w > self.max {
            self.new_row();
        }
        if self.started() {
            self.row.push(' ');
            self.used += 1;
        }
        // A word longer than a row is split where the row ends.
        for c in word.chars() {
            let cw = c.width().unwrap_or(0);
            if self.used + cw > self.max {
                self.new_row();
            }
            self.row.push(c);
            self.used += cw;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.started() || self.rows.is_empty() {
            self.rows.push(self.row);
        }
        self.rows
    }
}

/// A character shown, or an escape sequence, which takes no column.
enum Piece<'a> {
    Char(char),
    Escape(&'a str),
}

impl Piece<'_> {
    fn width(&self) -> usize {
        match self {
            Piece::Char(c) => c.width().unwrap_or(0),
            Piece::Escape(_) => 0,
        }
    }
}

fn pieces(text: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let c = rest.chars().next()?;
        if c == ESC {
            let len = escape_len(rest);
            let (seq, after) = rest.split_at(len);
            rest = after;
            Some(Piece::Escape(seq))
        } else {
            rest = &rest[c.len_utf8()..];
            Some(Piece::Char(c))
        }
    })
}

/// The length in bytes of the escape sequence `text` starts with (it starts with ESC): a CSI
/// (`ESC [`, parameters, one final byte: colours, cursor moves), an OSC (`ESC ]` up to BEL
/// or `ESC \`: titles, links), or ESC and one character. An unfinished one runs to the end.
fn escape_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let end_of = |found: Option<usize>| found.map_or(bytes.len(), |i| i + 1);
    match bytes.get(1) {
        Some(b'[') => end_of(
            bytes
                .iter()
                .skip(2)
                .position(|b| (0x40..=0x7e).contains(b))
                .map(|i| i + 2),
        ),
        Some(b']') => end_of(
            (2..bytes.len())
                .find(|&i| bytes[i] == 0x07 || (bytes[i] == b'\\' && bytes[i - 1] == 0x1b)),
        ),
        Some(b) if b.is_ascii() => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_counts_columns_not_bytes_nor_escapes() {
        assert_eq!(width("sim-1"), 5);
        assert_eq!(width("…"), 1);
        assert_eq!(width("naïve"), 5);
        // Wide characters take two columns, a combining mark none.
        assert_eq!(width("日本"), 4);
        assert_eq!(width("e\u{301}"), 1);
        assert_eq!(width("\x1b[1;31mred\x1b[0m"), 3);
        assert_eq!(width("\x1b]8;;http://x\x07link\x1b]8;;\x1b\\"), 4);
    }

    #[test]
    fn a_line_that_fits_is_left_alone() {
        assert!(matches!(fit("abc", 3), Cow::Borrowed("abc")));
        assert_eq!(fit("", 0), "");
    }

    #[test]
    fn a_long_line_is_cut_with_an_ellipsis_within_the_width() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abcdef", 1), "…");
        assert_eq!(fit("abcdef", 0), "");
        for max in 0..12 {
            let cut = fit("scale up MachineSet ns/a 2 -> 3", max);
            assert!(width(&cut) <= max, "{max}: {cut:?}");
        }
    }

    #[test]
    fn multi_byte_and_wide_characters_are_never_split() {
        assert_eq!(fit("ééééé", 3), "éé…");
        // A wide character that would cross the limit is left out whole.
        assert_eq!(fit("日本語", 4), "日…");
        assert_eq!(fit("日本語", 5), "日本…");
        assert_eq!(width(&fit("a日本語", 4)), 4);
    }

    #[test]
    fn escapes_take_no_column_and_are_kept_after_the_cut() {
        let red = "\x1b[31mabcdef\x1b[0m";
        assert!(matches!(fit(red, 6), Cow::Borrowed(_)));
        assert_eq!(fit(red, 4), "\x1b[31mabc…\x1b[0m");
        // An unfinished sequence runs to the end, and is not counted either.
        assert_eq!(width("ab\x1b[3"), 2);
    }

    #[test]
    fn outside_text_cannot_move_the_cursor_or_break_a_line() {
        assert_eq!(sanitize("a\nb\tc"), "a b c");
        assert_eq!(sanitize("x\x1b[2Ay"), "x\u{fffd}[2Ay");
        assert!(matches!(sanitize("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn wrapping_breaks_between_words_indents_and_stays_within_the_width() {
        let rows = wrap(
            "12:00:01 sim-1 MachineSet ns/workers replicas 2 -> 3",
            20,
            4,
            9,
        );
        assert_eq!(
            rows,
            [
                "12:00:01 sim-1",
                "    MachineSet",
                "    ns/workers",
                "    replicas 2 -> 3"
            ]
        );
        assert_eq!(wrap("short", 20, 4, 3), ["short"]);
        // A word longer than a row is split; a wide character is not.
        let rows = wrap("ab 日本語日本語", 8, 2, 9);
        assert!(rows.iter().all(|r| width(r) <= 8), "{rows:?}");
        assert_eq!(rows.concat().replace(' ', ""), "ab日本語日本語");
    }

    #[test]
    fn wrapping_stops_at_the_rows_asked_for_with_an_ellipsis() {
        let rows = wrap(&"word ".repeat(40), 20, 2, 3);
        assert_eq!(rows.len(), 3);
        assert!(rows[2].ends_with('…'), "{rows:?}");
        assert!(rows.iter().all(|r| width(r) <= 20), "{rows:?}");
    }
}
