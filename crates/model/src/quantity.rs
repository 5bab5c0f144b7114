//! Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`, `128974848`), parsed exactly.
//!
//! A quantity is held as an integer number of nano-units, so every suffix the API accepts
//! converts without floating point. Anything the API would reject, or a value outside what
//! the API can represent (more than 2^63-1 units), is an error: quantities come from cluster
//! objects and annotations, which this code never trusts.

use std::fmt;
use std::str::FromStr;

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// A parsed quantity: `nanos` units of 10^-9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

/// Why a string is not a quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("quantity {} is not a number followed by an optional suffix (e.g. 500m, 2Gi, 1e3)", crate::quote::quote(.0))]
    Malformed(String),
    #[error(
        "quantity {} has an unknown suffix {} (known: n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, e<N>)", crate::quote::quote(.0), crate::quote::quote(.1)
    )]
    UnknownSuffix(String, String),
    #[error("quantity {} is out of range (more than 2^63-1 units)", crate::quote::quote(.0))]
    OutOfRange(String),
    #[error("quantity {} is negative", crate::quote::quote(.0))]
    Negative(String),
}

/// The scale a suffix applies: `value × 10^exp10 × 1024^exp1024`.
#[derive(Clone, Copy)]
struct Scale {
    exp10: i32,
    exp1024: u32,
}

impl Quantity {
    /// The quantity of `units` whole units.
    pub const fn from_units(units: i64) -> Self {
        Quantity {
            nanos: units as i128 * NANOS_PER_UNIT,
        }
    }

    /// The quantity of `milli` thousandths of a unit.
    pub const fn from_milli(milli: i64) -> Self {
        Quantity {
            nanos: milli as i128 * NANOS_PER_MILLI,
        }
    }

    /// The exact value, in units of 10^-9.
    pub const fn nanos(self) -> i128 {
        self.nanos
    }

    /// Parses any quantity the Kubernetes API accepts, negative ones included.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        parse(text)
    }

    /// Parses a quantity that must not be negative (requests, capacities, limits).
    pub fn parse_non_negative(text: &str) -> Result<Self, QuantityError> {
        let q = parse(text)?;
        if q.nanos < 0 {
            return Err(QuantityError::Negative(text.to_string()));
        }
        Ok(q)
    }

    /// Whole thousandths, rounded up as Kubernetes does (`0.1m` is `1m`).
    pub fn milli_ceil(self) -> i64 {
        clamp_i64(div_ceil(self.nanos, NANOS_PER_MILLI))
    }

    /// Whole units, rounded up (`1500m` is `2`).
    pub fn units_ceil(self) -> i64 {
        clamp_i64(div_ceil(self.nanos, NANOS_PER_UNIT))
    }

    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl fmt::Display for Quantity {
    /// Canonical-ish form: whole units when exact, else milli-units, else nano-units.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANOS_PER_UNIT == 0 {
            write!(f, "{}", self.nanos / NANOS_PER_UNIT)
        } else if self.nanos % NANOS_PER_MILLI == 0 {
            write!(f, "{}m", self.nanos / NANOS_PER_MILLI)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

fn parse(text: &str) -> Result<Quantity, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let malformed = || QuantityError::Malformed(text.to_string());
    let out_of_range = || QuantityError::OutOfRange(text.to_string());

    let (negative, rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = rest
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(malformed());
    }
    let scale = parse_suffix(suffix).ok_or_else(|| {
        if suffix.starts_with(['e', 'E']) && suffix.len() > 1 {
            malformed()
        } else {
            QuantityError::UnknownSuffix(text.to_string(), suffix.to_string())
        }
    })?;

    // Exact rational: digits / 10^frac_len × scale, in nanos, rounded away from zero.
    let int_part = int_part.trim_start_matches('0');
    let frac_part = frac_part.trim_end_matches('0');
    // Zero is zero whatever its exponent (`0e39`).
    if int_part.is_empty() && frac_part.is_empty() {
        return Ok(Quantity { nanos: 0 });
    }
    // Fraction digits past a nano-unit's precision (with room for a binary suffix) only round
    // the value up: keep enough of them to round right, not so many the digits overflow.
    let keep = usize::try_from(10 + scale.exp10 + 4 * i32::try_from(scale.exp1024).unwrap_or(0))
        .unwrap_or(0);
    let (frac_part, beyond) = match frac_part.get(keep..) {
        Some(rest) if !rest.is_empty() => (&frac_part[..keep], true),
        _ => (frac_part, false),
    };
    let mut digits: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(i128::from(b - b'0')))
            .ok_or_else(out_of_range)?;
    }
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| out_of_range())?;
    let mut numerator = digits
        .checked_mul(NANOS_PER_UNIT)
        .ok_or_else(out_of_range)?;
    numerator = numerator
        .checked_mul(
            1024_i128
                .checked_pow(scale.exp1024)
                .ok_or_else(out_of_range)?,
        )
        .ok_or_else(out_of_range)?;
    let exp10 = scale.exp10 - frac_len;
    let nanos = if exp10 >= 0 {
        numerator
            .checked_mul(pow10(exp10).ok_or_else(out_of_range)?)
            .ok_or_else(out_of_range)?
    } else {
        match pow10(-exp10) {
            // Digits left out make the value a little more than what was kept.
            Some(denominator) if beyond && numerator % denominator == 0 => {
                numerator / denominator + 1
            }
            Some(denominator) => div_ceil(numerator, denominator),
            // The value is below one nano-unit but not zero: round up, as the API does.
            None => i128::from(numerator > 0 || beyond),
        }
    };
    if nanos > i128::from(i64::MAX) * NANOS_PER_UNIT {
        return Err(out_of_range());
    }
    Ok(Quantity {
        nanos: if negative { -nanos } else { nanos },
    })
}

fn parse_suffix(suffix: &str) -> Option<Scale> {
    let decimal = |exp10| Some(Scale { exp10, exp1024: 0 });
    let binary = |exp1024| Some(Scale { exp10: 0, exp1024 });
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Anything past ±60 is out of range or rounds to one nano-unit either way.
            let exp10 = exponent.parse::<i32>().ok()?.clamp(-60, 60);
            decimal(exp10)
        }
    }
}

fn pow10(exp: i32) -> Option<i128> {
    10_i128.checked_pow(u32::try_from(exp).ok()?)
}

fn div_ceil(numerator: i128, denominator: i128) -> i128 {
    let q = numerator / denominator;
    if numerator % denominator > 0 {
        q + 1
    } else {
        q
    }
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> i64 {
        Quantity::parse(s).unwrap().milli_ceil()
    }
    fn units(s: &str) -> i64 {
        Quantity::parse(s).unwrap().units_ceil()
    }

    #[test]
    fn decimal_suffixes() {
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(units("1k"), 1_000);
        assert_eq!(units("1M"), 1_000_000);
        assert_eq!(units("1G"), 1_000_000_000);
        assert_eq!(units("1T"), 1_000_000_000_000);
        assert_eq!(units("1P"), 1_000_000_000_000_000);
        assert_eq!(units("1E"), 1_000_000_000_000_000_000);
    }

    #[test]
    fn binary_suffixes() {
        assert_eq!(units("1Ki"), 1024);
        assert_eq!(units("1Mi"), 1 << 20);
        assert_eq!(units("1.5Gi"), 3 << 29);
        assert_eq!(units("2Ti"), 2 << 40);
        assert_eq!(units("1Pi"), 1 << 50);
        assert_eq!(units("1Ei"), 1 << 60);
    }

    #[test]
    fn exponents() {
        assert_eq!(units("1e3"), 1000);
        assert_eq!(units("1E3"), 1000);
        assert_eq!(units("12e+2"), 1200);
        assert_eq!(milli("1e-3"), 1);
        assert_eq!(milli("5e-1"), 500);
    }

    #[test]
    fn number_forms() {
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("5."), 5000);
        assert_eq!(milli("+1"), 1000);
        assert_eq!(milli("-1"), -1000);
        assert_eq!(milli("0"), 0);
        assert_eq!(units("0007"), 7);
        assert_eq!(units("1.000000000000000000000000000000"), 1);
    }

    #[test]
    fn rounds_up_like_the_api() {
        assert_eq!(milli("0.1m"), 1);
        assert_eq!(milli("1500000u"), 1500);
        assert_eq!(milli("1n"), 1);
        assert_eq!(units("1500m"), 2);
        assert_eq!(units("1.0000000001"), 2);
        assert_eq!(milli("1e-20"), 1);
    }

    #[test]
    fn malformed_is_an_error_never_a_panic() {
        for bad in [
            "", "m", "Ki", ".", "-", "1.2.3", "1e", "1e+", "1x", "1KiB", "1 Gi", " 1", "1e3.5",
            "e3", "1Gi1", "--1", "0x10", "1,5", "१",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(
            Quantity::parse("3kb"),
            Err(QuantityError::UnknownSuffix("3kb".into(), "kb".into()))
        );
    }

    #[test]
    fn out_of_range_is_an_error() {
        assert!(matches!(
            Quantity::parse("10E"),
            Err(QuantityError::OutOfRange(_))
        ));
        assert!(matches!(
            Quantity::parse("1e19"),
            Err(QuantityError::OutOfRange(_))
        ));
        assert!(matches!(
            Quantity::parse("8Ei"),
            Err(QuantityError::OutOfRange(_))
        ));
        assert!(matches!(
            Quantity::parse("99999999999999999999999999999999999999999"),
            Err(QuantityError::OutOfRange(_))
        ));
        assert!(matches!(
            Quantity::parse("1e999999"),
            Err(QuantityError::OutOfRange(_))
        ));
        assert_eq!(units("7Ei"), 7 << 60);
    }

    #[test]
    fn negative_rejected_where_it_must_be() {
        assert!(matches!(
            Quantity::parse_non_negative("-1"),
            Err(QuantityError::Negative(_))
        ));
        assert_eq!(Quantity::parse_non_negative("-0").unwrap().milli_ceil(), 0);
    }

    #[test]
    fn display_round_trips() {
        for s in ["1500m", "2", "1n"] {
            let q = Quantity::parse(s).unwrap();
            assert_eq!(Quantity::parse(&q.to_string()).unwrap(), q);
        }
    }
}
