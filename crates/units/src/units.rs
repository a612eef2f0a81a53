//! Units as the seeds use them: bandwidth in decimal GB/s (1 GB/s = 1e9 B/s),
//! capacities in binary KiB/MiB/GiB (1 GiB = 2^30 B), times in seconds.
//! (seed 001, chapter preamble; seed 000 §8.1.)
//!
//! Parsing accepts a number followed by an optional unit, with or without a
//! space: `192MiB`, `450 GB/s`, `400Gbit/s`, `0.833us`.

use thiserror::Error;

/// A number with a unit that could not be read.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum UnitError {
    #[error("\"{text}\" is not a number followed by a unit")]
    NotNumber { text: String },
    #[error("\"{text}\" has an unknown unit (expected one of {expected})")]
    UnknownUnit { text: String, expected: &'static str },
    #[error("\"{text}\" is too large")]
    Overflow { text: String },
    #[error("\"{text}\" is negative")]
    Negative { text: String },
    #[error("\"{text}\" must be greater than zero")]
    NotPositive { text: String },
    #[error("\"{text}\" is not a whole number of bytes")]
    NotWhole { text: String },
    #[error("\"{text}\" is more than the largest size, {max} bytes")]
    TooLarge { text: String, max: u64 },
}

const KIB: f64 = 1024.0;

/// Parse a byte size: `B`, `KiB`, `MiB`, `GiB`, `TiB` (binary) or `KB`, `MB`, `GB`, `TB`
/// (decimal). A bare number is bytes. Fractions must land on a whole byte.
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split(text);
    let value = finite(text, &number)?;
    // A lower-case b after a prefix is bits (Gb); a size in bits is a slip, not a size.
    if unit.len() == 2 && unit.ends_with('b') && "kKmMgGtT".contains(&unit[..1]) {
        return Err(UnitError::UnknownUnit {
            text: text.to_string(),
            expected: "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB (sizes are bytes: B, not b)",
        });
    }
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(UnitError::UnknownUnit {
                text: text.to_string(),
                expected: "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB",
            })
        }
    };
    if value < 0.0 {
        return Err(UnitError::Negative { text: text.to_string() });
    }
    let too_large = || UnitError::TooLarge { text: text.to_string(), max: MAX_BYTES };
    // A whole number is read exactly (9007199254740993 stays itself, not 2^53).
    if let Ok(whole) = number.trim_start_matches('+').parse::<u64>() {
        return whole.checked_mul(scale).filter(|&b| b <= MAX_BYTES).ok_or_else(too_large);
    }
    let bytes = value * scale as f64;
    if bytes > MAX_BYTES as f64 {
        return Err(too_large());
    }
    // Beyond 2^53 a fraction or an exponent no longer says which whole number it means.
    if bytes.fract() != 0.0 || bytes > (1u64 << 53) as f64 {
        return Err(UnitError::NotWhole { text: text.to_string() });
    }
    Ok(bytes as u64)
}

/// The largest size accepted: 2^63 − 1 bytes (8 EiB).
pub const MAX_BYTES: u64 = i64::MAX as u64;

/// Parse a bandwidth into bytes per second: `GB/s`, `MB/s`, `TB/s`, `B/s` (decimal bytes)
/// or `Gbit/s`, `Gbps`, `Mbit/s`, `Tbit/s` (decimal bits). A bare number is bytes per second.
pub fn parse_bytes_per_sec(text: &str) -> Result<f64, UnitError> {
    let (value, unit) = split_number(text)?;
    let unknown = || UnitError::UnknownUnit {
        text: text.to_string(),
        expected:
            "B/s, kB/s, MB/s, GB/s, TB/s (bytes; also GBps) or kbit/s, Mbit/s, Gbit/s, Tbit/s (bits; also Gb/s, Gbps)",
    };
    // The prefix is read in any case; the b of the rest is not: B is bytes, b is bits
    // (400 Gb/s is a 50 GB/s NIC, and was once read as 400 GB/s).
    let (prefix, rest) = match unit.chars().next() {
        Some(c) if "kKmMgGtT".contains(c) => (c.to_ascii_lowercase(), &unit[1..]),
        _ => (' ', unit),
    };
    let per_byte = match rest {
        "" if prefix == ' ' => 1.0,
        "B/s" | "Bps" => 1.0,
        "b/s" | "bps" | "bit/s" | "bits/s" | "Bit/s" => 1.0 / 8.0,
        _ => return Err(unknown()),
    };
    let scale = match prefix {
        ' ' => 1.0,
        'k' => 1e3,
        'm' => 1e6,
        'g' => 1e9,
        _ => 1e12,
    };
    positive(value * scale * per_byte, text)
}

/// Parse a duration into seconds: `s`, `ms`, `us` (or `µs`), `ns`. A bare number is seconds.
pub fn parse_secs(text: &str) -> Result<f64, UnitError> {
    let (value, unit) = split_number(text)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        "ms" => 1e-3,
        "us" | "µs" | "μs" => 1e-6,
        "ns" => 1e-9,
        _ => return Err(UnitError::UnknownUnit { text: text.to_string(), expected: "h, min, s, ms, us, ns" }),
    };
    if value < 0.0 {
        return Err(UnitError::Negative { text: text.to_string() });
    }
    Ok(value * scale)
}

fn positive(value: f64, text: &str) -> Result<f64, UnitError> {
    if value.is_nan() || value <= 0.0 {
        return Err(UnitError::NotPositive { text: text.to_string() });
    }
    if value.is_infinite() {
        return Err(UnitError::Overflow { text: text.to_string() });
    }
    Ok(value)
}

fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let (number, unit) = split(text);
    Ok((finite(text, &number)?, unit))
}

/// `number` (the number part of `text`) as a finite float.
fn finite(text: &str, number: &str) -> Result<f64, UnitError> {
    match number.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(UnitError::NotNumber { text: text.to_string() }),
    }
}

/// The number (underscores dropped) and the unit of `text`.
fn split(text: &str) -> (String, &str) {
    let trimmed = text.trim();
    let end = trimmed
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || (i == 0 && (c == '-' || c == '+'))
                // The exponent's sign: `1e-12s`, `1e+3`.
                || ((c == '-' || c == '+') && i > 0 && matches!(trimmed.as_bytes()[i - 1], b'e' | b'E'))
                || ((c == 'e' || c == 'E') && exponent_follows(&trimmed[i..])))
        })
        .map(|(i, _)| i)
        .unwrap_or(trimmed.len());
    (trimmed[..end].chars().filter(|&c| c != '_').collect(), trimmed[end..].trim())
}

/// `e` is an exponent only when digits (optionally signed) follow it: `1e9` yes, `1 elephants` no.
fn exponent_follows(rest: &str) -> bool {
    let mut chars = rest.chars().skip(1);
    match chars.next() {
        Some(c) if c.is_ascii_digit() => true,
        Some('-') | Some('+') => chars.next().is_some_and(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// Format bytes with the largest binary unit that keeps the value >= 1: `192 MiB`,
/// `8.516 MiB`, `24.5 KiB` (up to 5 significant digits).
/// A number as a person reads it in an error: as written for everyday magnitudes, in
/// scientific notation beyond them (`1e308`, not 309 digits; `5e-324`, not 324 zeros).
pub fn format_number(value: f64) -> String {
    let a = value.abs();
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    if (1e-4..1e9).contains(&a) {
        return trim_float(value, 12);
    }
    // The shortest form, unless arithmetic left float noise in it
    // (1e-308 GB/s is 9.999999999999999e-300 B/s): then 12 digits.
    let shortest = format!("{value:e}");
    let digits = shortest.split('e').next().unwrap_or("").chars().filter(char::is_ascii_digit).count();
    if digits <= 12 {
        return shortest;
    }
    let rounded = format!("{value:.11e}");
    match rounded.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
        None => rounded,
    }
}

pub fn format_bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    // `+ 0.0` turns -0.0 (an empty f64 sum) into 0.0.
    let mut value = bytes + 0.0;
    let mut unit = 0;
    while value.abs() >= KIB && unit + 1 < units.len() {
        value /= KIB;
        unit += 1;
    }
    format!("{} {}", trim_float(value, 5), units[unit])
}

/// Format a bandwidth in decimal units, e.g. `450 GB/s`, `51.2 TB/s`.
pub fn format_bytes_per_sec(bytes_per_sec: f64) -> String {
    let units = ["B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"];
    let mut value = bytes_per_sec;
    let mut unit = 0;
    while value.abs() >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{} {}", trim_float(value, 4), units[unit])
}

/// Format seconds in the unit that reads best: `7.575 ms`, `0.833 us`, `1.2 s`.
pub fn format_secs(secs: f64) -> String {
    // Beyond a day or below a picosecond, scientific notation (1e300 s is not 301 digits).
    if secs.is_finite() && secs != 0.0 && !(1e-12..1e5).contains(&secs.abs()) {
        return format!("{secs:.3e} s");
    }
    let (value, unit) = if secs == 0.0 {
        (0.0, "s")
    } else if secs.abs() >= 1.0 {
        (secs, "s")
    } else if secs.abs() >= 1e-3 {
        (secs * 1e3, "ms")
    } else if secs.abs() >= 1e-6 {
        (secs * 1e6, "us")
    } else {
        (secs * 1e9, "ns")
    };
    format!("{} {}", trim_float(value, 4), unit)
}

/// Up to `significant` significant digits, without trailing zeros.
pub fn trim_float(value: f64, significant: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (significant as i32 - 1 - magnitude).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_errors_stay_short() {
        assert_eq!(format_number(1e308), "1e308");
        assert_eq!(format_number(5e-324), "5e-324");
        assert_eq!(format_number(0.833e-6), "8.33e-7");
        assert_eq!(format_number(450e9), "4.5e11");
        assert_eq!(format_number(25.5), "25.5");
        assert_eq!(format_number(1e-308 * 1e9), "1e-299");
        assert_eq!(format_number(0.1 + 0.2), "0.3");
        assert_eq!(parse_secs("1e-12s").unwrap(), 1e-12);
        assert!((parse_bytes_per_sec("1e-3GB/s").unwrap() - 1e6).abs() < 1e-6);
    }

    #[test]
    fn sizes_are_binary_and_bandwidths_decimal() {
        assert_eq!(parse_bytes("192MiB").unwrap(), 192 * 1024 * 1024);
        assert_eq!(parse_bytes("192 MiB").unwrap(), 201_326_592);
        assert_eq!(parse_bytes("8").unwrap(), 8);
        assert_eq!(parse_bytes("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_bytes("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_bytes_per_sec("450 GB/s").unwrap(), 450e9);
        assert_eq!(parse_bytes_per_sec("400Gbit/s").unwrap(), 50e9);
        // B is bytes and b is bits, whatever the prefix's case.
        for (text, bytes_per_sec) in [
            ("400Gb/s", 50e9),
            ("400 Gbps", 50e9),
            ("400gbps", 50e9),
            ("50GBps", 50e9),
            ("50 gB/s", 50e9),
            ("100 Mb/s", 12.5e6),
            ("1e3 GB/s", 1e12),
            ("12", 12.0),
        ] {
            assert_eq!(parse_bytes_per_sec(text).unwrap(), bytes_per_sec, "{text}");
        }
        for text in ["50 GB", "50 gbs", "50 Gb/sec", "1e300 GB/s"] {
            assert!(parse_bytes_per_sec(text).is_err(), "{text}");
        }
        assert!(parse_bytes_per_sec("1e300 GB/s").unwrap_err().to_string().contains("too large"));
        assert!(parse_bytes("4Gb").unwrap_err().to_string().contains("B, not b"));
        assert_eq!(parse_bytes("4GB").unwrap(), 4_000_000_000);
        assert_eq!(parse_bytes_per_sec("1e9").unwrap(), 1e9);
        assert!((parse_secs("0.833us").unwrap() - 0.833e-6).abs() < 1e-18);
        assert_eq!(parse_secs("3 ms").unwrap(), 3e-3);
        assert_eq!(parse_secs("7.9h").unwrap(), 7.9 * 3600.0);
        assert_eq!(parse_secs("10min").unwrap(), 600.0);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(parse_bytes("-1MiB"), Err(UnitError::Negative { .. })));
        assert!(matches!(parse_bytes("1.5B"), Err(UnitError::NotWhole { .. })));
        assert!(matches!(parse_bytes("12 parsecs"), Err(UnitError::UnknownUnit { .. })));
        assert!(matches!(parse_bytes_per_sec("-5 GB/s"), Err(UnitError::NotPositive { .. })));
        assert!(matches!(parse_bytes_per_sec("0"), Err(UnitError::NotPositive { .. })));
        assert!(matches!(parse_bytes_per_sec("fast"), Err(UnitError::NotNumber { .. })));
        assert!(matches!(parse_bytes("1e400"), Err(UnitError::NotNumber { .. })));
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn formatting_reads_like_the_seed() {
        assert_eq!(format_bytes(201_326_592.0), "192 MiB");
        assert_eq!(format_bytes(12.0 * 1024.0 * 1024.0), "12 MiB");
        assert_eq!(format_bytes(5760.0 * 1024.0 * 1024.0), "5.625 GiB");
        assert_eq!(format_bytes(8_929_280.0), "8.5156 MiB");
        assert_eq!(format_bytes(16.0 * 1024.0 * 1024.0 * 1024.0), "16 GiB");
        assert_eq!(format_bytes(-0.0), "0 B");
        assert_eq!(format_bytes(2048.0), "2 KiB");
        assert_eq!(format_bytes_per_sec(51.2e12), "51.2 TB/s");
        assert_eq!(format_secs(7.575e-3), "7.575 ms");
        assert_eq!(format_secs(0.833e-6), "833 ns");
    }

    #[test]
    fn sizes_are_exact_and_bounded() {
        // Above 2^53 a float would round 9007199254740993 to 9007199254740992.
        assert_eq!(parse_bytes("9007199254740993"), Ok(9_007_199_254_740_993));
        assert!(parse_bytes("8 EiB").is_err(), "no EiB unit");
        assert!(matches!(parse_bytes("16777216TiB"), Err(UnitError::TooLarge { .. })));
        assert!(matches!(
            parse_bytes("99999999999999999999"),
            Err(UnitError::TooLarge { .. } | UnitError::NotWhole { .. })
        ));
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("1e3"), Ok(1000));
        assert!(matches!(parse_bytes("1e300"), Err(UnitError::TooLarge { .. })));
    }

    #[test]
    fn absurd_durations_print_in_scientific_notation() {
        assert_eq!(format_secs(1e300), "1.000e300 s");
        assert_eq!(format_secs(1e-320), "1.000e-320 s");
        assert_eq!(format_secs(0.0075), "7.5 ms");
    }
}
