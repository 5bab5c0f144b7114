//! Times as a person reads them: ages (`3m20s`, as kubectl's AGE column), and a moment
//! before or after another (`3m ago`, `in 5m`), also where a reason written for logs and the
//! API names it as an RFC 3339 timestamp (`removable at 2026-05-01T10:05:00Z`).

use std::borrow::Cow;

use jiff::{SignedDuration, Timestamp};

/// How long ago, as kubectl's AGE column says it (`k8s.io/apimachinery`'s
/// `HumanDuration`): `45s`, `3m20s`, `12m`, `5h3m`, `20h`, `3d4h`, `40d`, `2y30d`.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    let secs = now.duration_since(then).as_secs().max(0);
    let (minutes, hours, days) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if minutes < 10 => match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        },
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        },
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        },
        _ if days < 365 * 2 => format!("{days}d"),
        _ if days < 365 * 8 => match days % 365 {
            0 => format!("{}y", days / 365),
            d => format!("{}y{d}d", days / 365),
        },
        _ => format!("{}y", days / 365),
    }
}

/// `then` as seen from `now`: `3m ago`, `in 5m`, or `now` (within a second).
pub fn relative(then: Timestamp, now: Timestamp) -> String {
    let apart = then.duration_since(now);
    if apart.abs() < SignedDuration::from_secs(1) {
        "now".into()
    } else if apart.is_positive() {
        format!("in {}", age(now, then))
    } else {
        format!("{} ago", age(then, now))
    }
}

/// `text` with each RFC 3339 timestamp in it said relative to `now`: `at T` becomes `in 5m`
/// or `5m ago`, a `until T` still ahead `for another 5m`, any other `T` `in 5m` or `5m ago`
/// (`unneeded since 3m ago`). The reasons are written once, with timestamps, for the JSON
/// answers and the logs; people read how far away a moment is, not the moment.
pub fn with_ages(text: &str, now: Timestamp) -> Cow<'_, str> {
    // Timestamps are written in UTC, ending in `Z`.
    if !text.contains('Z') {
        return Cow::Borrowed(text);
    }
    let mut words: Vec<String> = Vec::new();
    let mut changed = false;
    for token in text.split(' ') {
        let Some((lead, then, tail)) = timestamp_in(token) else {
            words.push(token.to_string());
            continue;
        };
        changed = true;
        let before = words.last().map_or("", String::as_str);
        let (open, word) = before.split_at(before.len() - before.trim_start_matches('(').len());
        let ahead = then.duration_since(now) >= SignedDuration::from_secs(1);
        let phrase = match word {
            "at" => Some(relative(then, now)),
            "until" if ahead => Some(format!("for another {}", age(now, then))),
            _ => None,
        };
        let said = match phrase {
            // The word before is part of the phrase now (`at` is dropped).
            Some(phrase) => {
                let open = open.to_string();
                words.pop();
                format!("{open}{lead}{phrase}{tail}")
            }
            None => format!("{lead}{}{tail}", relative(then, now)),
        };
        words.push(said);
    }
    match changed {
        true => Cow::Owned(words.join(" ")),
        false => Cow::Borrowed(text),
    }
}

/// The timestamp a word holds, with what comes before and after it (`(`, `),`).
fn timestamp_in(token: &str) -> Option<(&str, Timestamp, &str)> {
    let start = token.find(|c: char| c.is_ascii_digit())?;
    let end = token.rfind('Z')? + 1;
    if end <= start {
        return None;
    }
    let then = token[start..end].parse().ok()?;
    Some((&token[..start], then, &token[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let now: Timestamp = "2025-06-01T12:00:00Z".parse().unwrap();
        let ago = |secs: i64| age(now - jiff::SignedDuration::from_secs(secs), now);
        let cases = [
            (-5, "0s"),
            (0, "0s"),
            (119, "119s"),
            (200, "3m20s"),
            (180, "3m"),
            (720, "12m"),
            (179 * 60, "179m"),
            (5 * 3600 + 180, "5h3m"),
            (2 * 3600, "120m"),
            (20 * 3600, "20h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (40 * 86_400, "40d"),
            (3 * 365 * 86_400 + 30 * 86_400, "3y30d"),
            (9 * 365 * 86_400, "9y"),
        ];
        for (secs, expected) in cases {
            assert_eq!(ago(secs), expected, "{secs}s");
        }
    }

    #[test]
    fn a_moment_is_said_before_or_after_now() {
        let now = at("2025-06-01T12:00:00Z");
        assert_eq!(relative(at("2025-06-01T11:57:00Z"), now), "3m ago");
        assert_eq!(relative(at("2025-06-01T12:05:00Z"), now), "in 5m");
        assert_eq!(relative(at("2025-06-01T12:00:00.500Z"), now), "now");
        assert_eq!(relative(now, now), "now");
    }

    #[test]
    fn timestamps_in_reasons_become_ages() {
        let now = at("2025-06-01T12:00:00Z");
        let said = |text: &str| with_ages(text, now).into_owned();
        assert_eq!(
            said("unneeded since 2025-06-01T11:57:00Z, removable at 2025-06-01T12:07:00Z"),
            "unneeded since 3m ago, removable in 7m"
        );
        assert_eq!(
            said("utilization 12%: removable at 2025-06-01T12:10:00Z if it stays unneeded"),
            "utilization 12%: removable in 10m if it stays unneeded"
        );
        assert_eq!(
            said("in backoff until 2025-06-01T12:05:00Z after: quota"),
            "in backoff for another 5m after: quota"
        );
        assert_eq!(
            said("created at 2025-06-01T11:59:30Z: it may scale up (until 2025-06-01T12:00:10.5Z)"),
            "created 30s ago: it may scale up (for another 10s)"
        );
        // A moment past that something lasted until, and one with fractions of a second.
        assert_eq!(said("held until 2025-06-01T11:58:00Z"), "held until 2m ago");
        assert_eq!(
            said("scale-up at 2025-06-01T11:54:59.987654321Z: no scale-down"),
            "scale-up 5m ago: no scale-down"
        );
    }

    #[test]
    fn text_with_no_timestamp_is_left_alone() {
        let now = at("2025-06-01T12:00:00Z");
        for text in ["no scale-up", "zone us-east-1a", "12Z", "Z 2025", ""] {
            assert!(
                matches!(with_ages(text, now), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }
}
