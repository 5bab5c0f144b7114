//! "Did you mean": a key that is not one of fleet.toml's (in the file, in a
//! `FLEETSCALER_*` variable, in `--set`) is most often a typo of one that is, and the parser's
//! own message lists every valid key (about fifty for the settings), which hides the one meant.

/// The parser's message about an unknown key (serde's `unknown field `x`, expected one of
/// `a`, `b``), told about a `noun` (`setting`, `key`) with the closest valid key when one is
/// close enough to be a typo; `None` for any other message.
pub fn unknown_key(message: &str, noun: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, expected) = rest.split_once("`, ")?;
    // The valid keys are the quoted words after the unknown one.
    let valid: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    Some(match closest(unknown, &valid) {
        Some(meant) => format!("unknown {noun} `{unknown}`; did you mean `{meant}`?"),
        None => format!("unknown {noun} `{unknown}`, {expected}"),
    })
}

/// The candidate nearest to `word`, if a few edits away (about one in three of its
/// characters): near enough to be a typo, not a different word. Case, and `-` for `_`, are
/// not counted (`Max-Nodes-Total` is `max_nodes_total`).
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    };
    let typed = norm(word);
    candidates
        .iter()
        .filter_map(|&c| {
            let valid = norm(c);
            let limit = (valid.len() / 3).max(1);
            // Keys can be any length (a file is outside input): the distance is at least the
            // difference in length, so most candidates need no computing.
            if typed.len().abs_diff(valid.len()) > limit {
                return None;
            }
            let d = edit_distance(&typed, &valid);
            (d <= limit).then_some((d, c))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance: the insertions, deletions and substitutions that make `a` into `b`,
/// one row of the table at a time.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        edit_distance(&a, &b)
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("unneded", "unneeded"), 1);
        assert_eq!(distance("totl", "total"), 1);
        assert_eq!(distance("naïve", "naive"), 1);
    }

    #[test]
    fn the_closest_key_is_suggested_only_when_near() {
        let keys = [
            "scale_down_unneeded_time",
            "scale_down_unready_time",
            "max_nodes_total",
        ];
        assert_eq!(
            closest("scale_down_unneded_time", &keys),
            Some("scale_down_unneeded_time")
        );
        assert_eq!(
            closest("scale_down_unredy_time", &keys),
            Some("scale_down_unready_time")
        );
        assert_eq!(closest("Max-Nodes-Total", &keys), Some("max_nodes_total"));
        assert_eq!(closest("maxNodesTotal", &keys), Some("max_nodes_total"));
        assert_eq!(closest("cpu", &keys), None);
        assert_eq!(closest("unneeded", &keys), None);
        assert_eq!(closest(&"x".repeat(100_000), &keys), None);
    }

    #[test]
    fn the_parsers_message_names_the_key_meant() {
        let serde = "unknown field `scale_down_unneded_time`, expected one of `seed`, `scale_down_unneeded_time`, `max_nodes_total`";
        assert_eq!(
            unknown_key(serde, "setting").as_deref(),
            Some(
                "unknown setting `scale_down_unneded_time`; did you mean `scale_down_unneeded_time`?"
            )
        );
        // Nothing near: the list stays, that the user can pick from it.
        let far = "unknown field `cpu`, expected `seed` or `cores`";
        assert_eq!(
            unknown_key(far, "key").as_deref(),
            Some("unknown key `cpu`, expected `seed` or `cores`")
        );
        assert_eq!(unknown_key("invalid type: string", "key"), None);
    }
}
