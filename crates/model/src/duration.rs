//! Go duration strings (`10m`, `1h30m`, `1.5h`, `300ms`), the format of every duration in
//! the ClusterAutoscaler resource and the autoscaler's flags.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error(
        "{} is not a duration (examples: 30s, 10m, 1h30m, 1.5h, 300ms; units ns, us, ms, s, m, h)",
        crate::quote::quote(.0)
    )]
    Syntax(String),
    #[error(
        "{} is longer than any duration Go (and so the autoscaler) can hold: at most 2562047h",
        crate::quote::quote(.0)
    )]
    TooLong(String),
}

/// Go's `time.Duration` is an int64 of nanoseconds (about 292 years). Longer values are
/// refused as Go refuses them, and nothing downstream adds them to a clock and overflows.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a non-negative Go duration. A bare `0` is allowed, as in Go.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let err = || DurationError::Syntax(text.to_string());
    let body = text.strip_prefix('+').unwrap_or(text);
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() || body.starts_with('-') {
        return Err(err());
    }
    let mut total_nanos: u128 = 0;
    let mut rest = body;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (number, tail) = rest.split_at(num_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(err()),
        };
        total_nanos = total_nanos
            .checked_add(scaled(number, unit_nanos).ok_or_else(err)?)
            .ok_or_else(err)?;
        rest = next;
    }
    if total_nanos > MAX_NANOS {
        return Err(DurationError::TooLong(text.to_string()));
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| err())?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

/// `number × unit_nanos`, where number may have a fraction (`1.5`).
fn scaled(number: &str, unit_nanos: u128) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let int_value: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = int_value.checked_mul(unit_nanos)?;
    let mut scale = unit_nanos;
    for digit in frac.bytes().take(18) {
        scale /= 10;
        total = total.checked_add(u128::from(digit - b'0') * scale)?;
    }
    Some(total)
}

/// Formats a duration the way Go prints it (`1h30m0s`, `10m0s`, `45s`, `0s`).
pub fn format_go_duration(d: Duration) -> String {
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    let millis = d.subsec_millis();
    let secs = if millis > 0 {
        format!("{s}.{millis:03}").trim_end_matches('0').to_string()
    } else {
        s.to_string()
    };
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> f64 {
        parse_go_duration(s).unwrap().as_secs_f64()
    }

    #[test]
    fn parses_go_forms() {
        assert_eq!(secs("10m"), 600.0);
        assert_eq!(secs("1h30m"), 5400.0);
        assert_eq!(secs("1.5h"), 5400.0);
        assert_eq!(secs("300ms"), 0.3);
        assert_eq!(secs("0"), 0.0);
        assert_eq!(secs("0s"), 0.0);
        assert_eq!(secs("2h45m30s"), 9930.0);
        assert_eq!(parse_go_duration("1us").unwrap(), Duration::from_micros(1));
    }

    #[test]
    fn rejects_what_go_rejects_and_negatives() {
        for bad in [
            "", "10", "m", "10x", "-5m", "1..5h", "5m-", "1d", "h1", " 5m",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
        assert!(parse_go_duration("99999999999999999999h").is_err());
        // Seed of issue 12: accepted, then overflowed a clock and panicked a runner.
        assert_eq!(
            parse_go_duration("18446744073709551615s"),
            Err(DurationError::TooLong("18446744073709551615s".into()))
        );
        assert!(parse_go_duration("2562047h").is_ok());
        assert!(parse_go_duration("2562048h").is_err());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
    }
}
