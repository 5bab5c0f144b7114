//! Fuzz targets of Kubernetes quantities and Go durations (declared in tests/fleet/fuzz/mod.rs): any
//! text is read or refused without a panic, an error names the text, what is shown reads
//! back as the same value, values are exact, and overflow is an error or saturates, never
//! wraps.

use std::time::Duration;

use fleetscaler::model::duration::{DurationError, format_go_duration, parse_go_duration};
use fleetscaler::model::{Quantity, QuantityError};
use proptest::prelude::*;
use proptest::sample::select;

use crate::fuzz_support::{self, caught};

/// A quantity's error names the text it could not read (its caller adds the field).
fn check_quantity(text: &str) -> Result<(), String> {
    let parsed = caught(|| Quantity::parse(text))?;
    let non_negative = caught(|| Quantity::parse_non_negative(text))?;
    match (&parsed, &non_negative) {
        (Ok(q), Ok(n)) if q == n && !q.is_negative() => {}
        (Ok(q), Err(QuantityError::Negative(_))) if q.is_negative() => {}
        (Err(a), Err(b)) if a == b => {}
        _ => {
            return Err(format!(
                "parse {parsed:?} and parse_non_negative {non_negative:?} disagree"
            ));
        }
    }
    match parsed {
        Ok(q) => {
            // Display is a quantity that reads back as the same value.
            let shown = q.to_string();
            if Quantity::parse(&shown) != Ok(q) {
                let back = Quantity::parse(&shown);
                return Err(format!(
                    "{q:?} shows as {shown:?}, which reads back as {back:?}"
                ));
            }
            // Rounded up to milli and to whole units: the same ceiling, saturated, not wrapped.
            let (milli, units) = (q.milli_ceil(), q.units_ceil());
            let consistent = match milli {
                i64::MAX => units > 0,
                i64::MIN => units < 0,
                m => {
                    units == m / 1000 + i64::from(m % 1000 > 0)
                        && (m < 0) == (q.is_negative() && m != 0)
                }
            };
            if !consistent {
                return Err(format!(
                    "{q:?}: milli_ceil {milli} and units_ceil {units} disagree"
                ));
            }
            Ok(())
        }
        Err(QuantityError::Empty) if text.is_empty() => Ok(()),
        // Named by the text itself, or its first characters and length when long.
        Err(e) if e.to_string().contains(&fleetscaler::model::quote(text)) => Ok(()),
        Err(e) => Err(format!("error {e} does not name the text {text:?}")),
    }
}

/// Text shaped like a quantity: sign, digits, fraction, any suffix, exponent.
fn quantity_text() -> impl Strategy<Value = String> {
    let suffixes = vec![
        "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e",
        "K", "mi", "i",
    ];
    let suffix = prop_oneof![
        select(suffixes).prop_map(str::to_string),
        "[eE][-+]?[0-9]{1,4}",
        "[eE][-+]?[0-9]{15,25}",
        "[a-zA-Z.+-]{1,3}",
    ];
    (
        "[-+]?",
        "[0-9]{0,30}",
        prop::option::of("[.][0-9]{0,30}"),
        suffix,
    )
        .prop_map(|(sign, int, frac, suffix)| {
            format!("{sign}{int}{}{suffix}", frac.unwrap_or_default())
        })
}

#[test]
fn quantities_never_panic_round_trip_and_name_the_text() {
    let text = prop_oneof![
        any::<String>(),
        quantity_text(),
        quantity_text().prop_map(|q| format!("{q}{q}")),
    ];
    fuzz_support::run(
        "quantities_never_panic_round_trip_and_name_the_text",
        1000,
        text,
        |t| check_quantity(&t),
    );
}

/// `digits × 1024^exp1024 × 10^shift` rounded up, by decimal arithmetic on digit strings
/// (no width to overflow), as a string without leading zeros.
fn exact_decimal(digits: &str, exp1024: u32, shift: i64) -> String {
    // Little-endian decimal digits.
    let mut n: Vec<u32> = digits.bytes().rev().map(|b| u32::from(b - b'0')).collect();
    for _ in 0..exp1024 {
        let mut carry = 0;
        for d in &mut n {
            let v = *d * 1024 + carry;
            *d = v % 10;
            carry = v / 10;
        }
        while carry > 0 {
            n.push(carry % 10);
            carry /= 10;
        }
    }
    let (kept, round_up) = if shift >= 0 {
        let mut kept = vec![0; shift as usize];
        kept.extend(&n);
        (kept, false)
    } else {
        let cut = (shift.unsigned_abs() as usize).min(n.len());
        (n[cut..].to_vec(), n[..cut].iter().any(|&d| d != 0))
    };
    let mut text: String = kept
        .iter()
        .rev()
        .map(|d| char::from(b'0' + *d as u8))
        .collect();
    text = text.trim_start_matches('0').to_string();
    if round_up {
        // + 1 on the decimal string: the cut part was not zero.
        let mut bytes = text.into_bytes();
        let mut i = bytes.len();
        loop {
            if i == 0 {
                bytes.insert(0, b'1');
                break;
            }
            i -= 1;
            if bytes[i] == b'9' {
                bytes[i] = b'0';
            } else {
                bytes[i] += 1;
                break;
            }
        }
        text = String::from_utf8(bytes).unwrap();
    }
    text
}

/// Whether decimal `a` (no leading zeros) is greater than `b`.
fn greater(a: &str, b: &str) -> bool {
    (a.len(), a) > (b.len(), b)
}

/// The exact nano-units of a quantity, rounded up, or `None` past 2^63-1 units.
fn exact_nanos(digits: &str, frac_len: usize, exp10: i64, exp1024: u32) -> Option<i128> {
    let nanos = exact_decimal(digits, exp1024, exp10 - frac_len as i64 + 9);
    let limit = (i128::from(i64::MAX) * 1_000_000_000).to_string();
    if greater(&nanos, &limit) {
        return None;
    }
    Some(if nanos.is_empty() {
        0
    } else {
        nanos.parse().unwrap()
    })
}

/// Inputs whose value is in range but that `Quantity::parse` refuses as out of range, as
/// the ignored regression tests below show: its arithmetic multiplies every digit and the
/// exponent out in an i128 before it divides, so more than ~29 significant digits, or a zero
/// with an exponent past 38, overflow. Left out here so that the target keeps finding
/// other bugs; remove this when those tests pass.
fn known_false_out_of_range(digits: &str, frac_len: usize, exp10: i64, exp1024: u32) -> bool {
    let intermediate = exact_decimal(digits, exp1024, 9);
    greater(&intermediate, &i128::MAX.to_string()) || exp10 - frac_len as i64 > 38
}

#[test]
fn quantities_are_exact_and_overflow_is_an_error() {
    let suffixes: Vec<(&str, i64, u32)> = vec![
        ("", 0, 0),
        ("n", -9, 0),
        ("u", -6, 0),
        ("m", -3, 0),
        ("k", 3, 0),
        ("M", 6, 0),
        ("G", 9, 0),
        ("T", 12, 0),
        ("P", 15, 0),
        ("E", 18, 0),
        ("Ki", 0, 1),
        ("Mi", 0, 2),
        ("Gi", 0, 3),
        ("Ti", 0, 4),
        ("Pi", 0, 5),
        ("Ei", 0, 6),
    ];
    let suffix = prop_oneof![
        select(suffixes).prop_map(|(s, e10, e1024)| (s.to_string(), e10, e1024)),
        (-30i64..45).prop_map(|e| (format!("e{e}"), e, 0)),
    ];
    let strategy = (any::<bool>(), "[1-9][0-9]{0,20}|0", "[0-9]{0,12}", suffix);
    fuzz_support::run(
        "quantities_are_exact_and_overflow_is_an_error",
        1000,
        strategy,
        |(negative, int, frac, (suffix, exp10, exp1024))| {
            let sign = if negative { "-" } else { "" };
            let point = if frac.is_empty() { "" } else { "." };
            let text = format!("{sign}{int}{point}{frac}{suffix}");
            let digits = format!("{int}{frac}");
            let parsed = caught(|| Quantity::parse(&text))?;
            let expected = exact_nanos(&digits, frac.len(), exp10, exp1024);
            if matches!(parsed, Err(QuantityError::OutOfRange(_)))
                && expected.is_some()
                && known_false_out_of_range(&digits, frac.len(), exp10, exp1024)
            {
                return Ok(());
            }
            // Compared through Display, the one view of the nanos the type gives.
            let want = expected.map(|n| {
                let n = if negative { -n } else { n };
                let (unit, milli) = (1_000_000_000, 1_000_000);
                if n % unit == 0 {
                    format!("{}", n / unit)
                } else if n % milli == 0 {
                    format!("{}m", n / milli)
                } else {
                    format!("{n}n")
                }
            });
            match (&want, &parsed) {
                (Some(w), Ok(q)) if *w == q.to_string() => Ok(()),
                (None, Err(QuantityError::OutOfRange(_))) => Ok(()),
                _ => Err(format!("{text:?}: exact value {want:?}, parsed {parsed:?}")),
            }
        },
    );
}

/// A duration's error names the text; an accepted one fits Go's int64 nanoseconds.
fn check_duration(text: &str) -> Result<(), String> {
    match caught(|| parse_go_duration(text))? {
        Ok(d) if d.as_nanos() <= i64::MAX as u128 => {
            // Go's format keeps milliseconds: what it prints reads back as the same duration.
            let whole_ms = Duration::from_millis(d.as_millis() as u64);
            let shown = format_go_duration(whole_ms);
            match parse_go_duration(&shown) {
                Ok(back) if back == whole_ms => Ok(()),
                other => Err(format!(
                    "{whole_ms:?} shows as {shown:?}, read back as {other:?}"
                )),
            }
        }
        Ok(d) => Err(format!(
            "{text:?} accepted as {d:?}, longer than Go can hold"
        )),
        // Named by the text itself, or its first characters and length when long.
        Err(e) if e.to_string().contains(&fleetscaler::model::quote(text)) => Ok(()),
        Err(e) => Err(format!("error {e} does not name the text {text:?}")),
    }
}

#[test]
fn durations_never_panic_round_trip_and_name_the_text() {
    let unit = select(vec![
        "ns", "us", "µs", "μs", "ms", "s", "m", "h", "", "d", "S", "sm",
    ]);
    let part = ("[0-9]{0,22}", prop::option::of("[.][0-9]{0,22}"), unit)
        .prop_map(|(i, f, u)| format!("{i}{}{u}", f.unwrap_or_default()));
    let shaped = ("[-+]?", prop::collection::vec(part, 1..4))
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()));
    fuzz_support::run(
        "durations_never_panic_round_trip_and_name_the_text",
        1000,
        prop_oneof![any::<String>(), shaped],
        |t| check_duration(&t),
    );
}

#[test]
fn durations_sum_exactly_or_are_too_long_never_wrap() {
    let units: Vec<(&str, u128)> = vec![
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    let part = (prop_oneof![0u64..100_000, any::<u64>()], select(units));
    fuzz_support::run(
        "durations_sum_exactly_or_are_too_long_never_wrap",
        1000,
        prop::collection::vec(part, 1..5),
        |parts| {
            let text: String = parts.iter().map(|(n, (u, _))| format!("{n}{u}")).collect();
            let exact: u128 = parts.iter().map(|(n, (_, ns))| u128::from(*n) * ns).sum();
            let max = i64::MAX as u128;
            match caught(|| parse_go_duration(&text))? {
                Ok(d) if d.as_nanos() == exact && exact <= max => Ok(()),
                Err(DurationError::TooLong(_)) if exact > max => Ok(()),
                other => Err(format!("{text:?}: exact {exact} ns, parsed {other:?}")),
            }
        },
    );
}

#[test]
fn quantity_and_duration_overflow_is_an_error_never_a_wrap() {
    let out_of_range = [
        "99999999999999999999Ei",
        "1e308",
        "8Ei",
        "9223372036854775808",
        "-9223372036854775808",
        "1e19",
        "10E",
        "1e999999",
    ];
    for text in out_of_range {
        let q = Quantity::parse(text);
        assert!(
            matches!(q, Err(QuantityError::OutOfRange(_))),
            "{text}: {q:?}"
        );
    }
    // An exponent past i32 is refused too (as malformed rather than out of range).
    assert!(Quantity::parse("1E1000000000000").is_err());
    // The largest quantities: whole units exact, milli-units saturated.
    let max = Quantity::parse("9223372036854775807").unwrap();
    assert_eq!((max.units_ceil(), max.milli_ceil()), (i64::MAX, i64::MAX));
    let min = Quantity::parse("-9223372036854775807").unwrap();
    assert_eq!((min.units_ceil(), min.milli_ceil()), (-i64::MAX, i64::MIN));
    let too_long = [
        "2562048h",
        "18446744073709551615s",
        "9223372036854775808ns",
        "2562047h47m16.854775808s",
    ];
    for text in too_long {
        let d = parse_go_duration(text);
        assert!(matches!(d, Err(DurationError::TooLong(_))), "{text}: {d:?}");
    }
    assert!(parse_go_duration("99999999999999999999999999999999999999999h").is_err());
    let max = parse_go_duration("2562047h47m16.854775807s").unwrap();
    assert_eq!(max.as_nanos(), i64::MAX as u128);
}

// Regressions found by `quantities_are_exact_and_overflow_is_an_error` (seed 12): in-range
// values were refused as "out of range" because the digits were multiplied out in an i128
// before the division that brings the value back (crates/model/src/quantity.rs, `parse`).

#[test]
fn a_quantity_with_many_significant_digits_is_read() {
    // Shrunk from "170150000000000000000.000000001n" (1.7e11 units).
    let q = Quantity::parse("1.0000000000000000000000000000001");
    assert_eq!(q.map(|q| q.to_string()), Ok("1000000001n".to_string()));
}

#[test]
fn zero_with_a_large_exponent_is_zero() {
    assert_eq!(Quantity::parse("0e39"), Ok(Quantity::from_units(0)));
}
