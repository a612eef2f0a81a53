//! Scenario inputs with units. A field named `*_bytes_per_sec` accepts `50e9` or
//! `"50 GB/s"` / `"400 Gbit/s"`; `*_bytes` accepts `4096` or `"4 KiB"`; `*_secs`
//! accepts `2e-6` or `"2 us"`. A unit that does not fit the field (`"50 GiB"` for a
//! bandwidth), a negative value or a non-number is an error that names the field.

use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::units::{parse_bytes, parse_bytes_per_sec, parse_secs};

#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Number(f64),
    Text(String),
}

fn number<'de, D: Deserializer<'de>>(
    d: D,
    parse: fn(&str) -> Result<f64, String>,
    what: &str,
) -> Result<f64, D::Error> {
    let raw = Raw::deserialize(d)
        .map_err(|_| de::Error::custom(format!("expected {what} (a number or a string with a unit)")))?;
    checked(raw, parse, what)
}

fn checked<E: de::Error>(raw: Raw, parse: fn(&str) -> Result<f64, String>, what: &str) -> Result<f64, E> {
    let value = match raw {
        Raw::Number(v) => v,
        Raw::Text(t) => parse(&t).map_err(E::custom)?,
    };
    if !value.is_finite() || value < 0.0 {
        return Err(E::custom(format!(
            "{what} must be a finite number >= 0 (got {})",
            crate::units::format_number(value)
        )));
    }
    Ok(value)
}

/// An optional quantity: absent or null is `None`.
fn optional<'de, D: Deserializer<'de>>(
    d: D,
    parse: fn(&str) -> Result<f64, String>,
    what: &str,
) -> Result<Option<f64>, D::Error> {
    match Option::<Raw>::deserialize(d)
        .map_err(|_| de::Error::custom(format!("expected {what} (a number or a string with a unit)")))?
    {
        None => Ok(None),
        Some(raw) => checked(raw, parse, what).map(Some),
    }
}

fn bw(t: &str) -> Result<f64, String> {
    parse_bytes_per_sec(t).map_err(|e| e.to_string())
}
fn size(t: &str) -> Result<f64, String> {
    parse_bytes(t).map(|b| b as f64).map_err(|e| e.to_string())
}
fn time(t: &str) -> Result<f64, String> {
    parse_secs(t).map_err(|e| e.to_string())
}
fn plain(t: &str) -> Result<f64, String> {
    t.trim().parse::<f64>().map_err(|_| format!("\"{t}\" is not a number"))
}

pub fn bytes_per_sec<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, bw, "a bandwidth")
}
/// An optional bandwidth: absent or null is `None`.
pub fn optional_bytes_per_sec<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    optional(d, bw, "a bandwidth")
}
/// An optional size: absent or null is `None`.
pub fn optional_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    optional(d, size, "a size")
}
/// An optional duration: absent or null is `None`.
pub fn optional_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    optional(d, time, "a duration")
}
pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, size, "a size")
}
pub fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, time, "a duration")
}
/// A plain non-negative number (counts, fractions, cycles).
pub fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, plain, "a number")
}

fn list<'de, D: Deserializer<'de>>(
    d: D,
    parse: fn(&str) -> Result<f64, String>,
    what: &str,
) -> Result<Vec<f64>, D::Error> {
    let raw: Vec<Raw> = Vec::deserialize(d)?;
    raw.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let v = match r {
                Raw::Number(v) => v,
                Raw::Text(t) => parse(&t).map_err(|e| de::Error::custom(format!("[{i}]: {e}")))?,
            };
            if !v.is_finite() || v < 0.0 {
                return Err(de::Error::custom(format!(
                    "[{i}]: {what} must be a finite number >= 0 (got {})",
                    crate::units::format_number(v)
                )));
            }
            Ok(v)
        })
        .collect()
}

pub fn bytes_per_sec_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    list(d, bw, "a bandwidth")
}
pub fn bytes_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    list(d, size, "a size")
}
pub fn secs_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    list(d, time, "a duration")
}
