//! Quoting a value that came from outside in a message: whole when short, else a prefix and
//! its length, so that a 100 KB value never makes a 100 KB error (nor log line, nor status
//! field).

/// The longest value quoted whole, in characters.
pub const QUOTED_CHARS: usize = 64;

/// `value` in double quotes, escaped as `{:?}` escapes it; cut after its first
/// [`QUOTED_CHARS`] characters, with its whole length in bytes, when longer.
pub fn quote(value: &str) -> String {
    match value.char_indices().nth(QUOTED_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &value[..cut], value.len()),
    }
}

/// `text` cut to at most `max` bytes (on a character boundary) with its whole length when
/// longer: for messages that may carry a value from outside in words this program did not
/// write (a parser's error quoting its input).
pub fn bounded(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let cut = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}… ({} bytes in all)", &text[..cut], text.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_bounded_on_a_character() {
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("0123456789ab", 10), "0123456789… (12 bytes in all)");
        assert_eq!(bounded("ééé", 3), "é… (6 bytes in all)");
    }

    #[test]
    fn short_values_are_quoted_whole_and_long_ones_cut_with_their_length() {
        assert_eq!(quote("half"), "\"half\"");
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
        let long = "x".repeat(100_000);
        let q = quote(&long);
        assert_eq!(
            q,
            format!("\"{}\"… (100000 bytes)", "x".repeat(QUOTED_CHARS))
        );
        // Cut on a character, never inside one.
        let wide = "é".repeat(100);
        assert!(quote(&wide).starts_with(&format!("\"{}\"…", "é".repeat(QUOTED_CHARS))));
        assert_eq!(
            quote(&"é".repeat(QUOTED_CHARS)),
            format!("{:?}", "é".repeat(QUOTED_CHARS))
        );
    }
}
