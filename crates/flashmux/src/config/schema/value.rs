//! Scenario values with units, read as serde reads the file: a size (`"256KiB"`, or a plain
//! integer of bytes), a duration (`"10ms"`: the unit is required) and a transfer rate
//! (`"800MB/s"`). A value that does not parse is rejected where it is read, so the error names
//! its key and line (`scenario.toml:7: device.timing.read: invalid duration '5': ...`) with the
//! same text as `units`' parsers give on the command line.

use crate::units::{parse_duration, parse_rate, parse_size, Nanos};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// Bytes, from `"4k"`, `"8GiB"`, `"256GB"` or an integer; `text` is the value as written, for
/// messages that quote it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Size {
    pub(super) bytes: u64,
    pub(super) text: String,
}

/// A duration, from `"100us"`, `"2.5ms"`, `"1s"`, and the value as written (for messages that
/// quote it).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Duration(pub(super) Nanos, pub(super) String);

/// Bytes per second, from `"800MB/s"`, `"1.2GiB/s"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Rate(pub(super) u64);

/// A duration given, or `default`.
pub(super) fn or(given: &Option<Duration>, default: Nanos) -> Nanos {
    given.as_ref().map_or(default, |d| d.0)
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as \"4k\", \"64KiB\" or \"8GiB\", or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Size, E> {
                parse_size(s).map(|bytes| Size { bytes, text: s.to_string() }).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size { bytes: n, text: n.to_string() })
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n).map_err(|_| E::custom(format!("{n} bytes: a size cannot be negative"))).and_then(|n| self.visit_u64(n))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration with its unit, such as \"100us\", \"2.5ms\" or \"1s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                parse_duration(s).map(|d| Duration(d, s.to_string())).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rate such as \"800MB/s\" or \"1.2GiB/s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Rate, E> {
                parse_rate(s).map(Rate).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    struct T {
        size: Option<Size>,
        time: Option<Duration>,
        rate: Option<Rate>,
    }

    fn read(text: &str) -> Result<T, String> {
        toml::from_str(text).map_err(|e: toml::de::Error| e.message().to_string())
    }

    #[test]
    fn values_parse_with_their_units() {
        let t = read("size = \"64KiB\"\ntime = \"2.5ms\"\nrate = \"1MB/s\"").unwrap();
        assert_eq!(t.size.map(|s| (s.bytes, s.text)), Some((65536, "64KiB".into())));
        assert_eq!(t.time, Some(Duration(Nanos(2_500_000), "2.5ms".into())));
        assert_eq!(t.rate, Some(Rate(1_000_000)));
        assert_eq!(read("size = 4096").unwrap().size.map(|s| s.bytes), Some(4096), "a plain integer is bytes");
        assert!(read("").unwrap().size.is_none());
    }

    #[test]
    fn bad_values_say_what_was_expected() {
        assert_eq!(read("size = \"4 parsecs\"").unwrap_err(), parse_size("4 parsecs").unwrap_err().to_string());
        assert_eq!(read("time = \"5\"").unwrap_err(), parse_duration("5").unwrap_err().to_string());
        assert_eq!(read("rate = \"5MB\"").unwrap_err(), parse_rate("5MB").unwrap_err().to_string());
        assert_eq!(read("size = -1").unwrap_err(), "-1 bytes: a size cannot be negative");
        assert!(read("time = 5").unwrap_err().contains("expected a duration with its unit"), "a unit is required");
        assert!(read("rate = 5").unwrap_err().contains("expected a rate such as"));
        assert!(read("size = true").unwrap_err().contains("expected a size such as"));
    }
}
