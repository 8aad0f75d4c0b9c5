//! Newtypes for time, sizes, addresses and ids, and parsing of user-facing unit strings.
//!
//! The model never mixes units silently: instants are [`SimTime`], durations [`Nanos`], and every
//! address space and id has its own type. Config files accept unit strings such as `"65us"`,
//! `"0.55ms"`, `"8GiB"` or `"4k"`; see [`parse_size`] and [`parse_duration`].

use serde::Serialize;
use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub};

/// An instant of simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct SimTime(pub u64);

/// A duration in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
pub struct Nanos(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub fn ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time elapsed since `earlier`; zero if `earlier` is later (never underflows).
    pub fn since(self, earlier: SimTime) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    pub fn ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time to move `bytes` at `bytes_per_sec`, rounded up to a whole nanosecond.
    pub fn for_transfer(bytes: u64, bytes_per_sec: u64) -> Nanos {
        if bytes_per_sec == 0 {
            return Nanos::ZERO;
        }
        let ns = (bytes as u128 * 1_000_000_000).div_ceil(bytes_per_sec as u128);
        Nanos(ns.min(u64::MAX as u128) as u64)
    }
}

impl Add<Nanos> for SimTime {
    type Output = SimTime;
    fn add(self, d: Nanos) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Nanos> for SimTime {
    fn add_assign(&mut self, d: Nanos) {
        *self = *self + d;
    }
}
impl Add for Nanos {
    type Output = Nanos;
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(o.0))
    }
}
impl AddAssign for Nanos {
    fn add_assign(&mut self, o: Nanos) {
        *self = *self + o;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(o.0))
    }
}
impl Mul<u64> for Nanos {
    type Output = Nanos;
    fn mul(self, k: u64) -> Nanos {
        Nanos(self.0.saturating_mul(k))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_duration_ns(self.0, f)
    }
}
impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_duration_ns(self.0, f)
    }
}

fn fmt_duration_ns(ns: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if ns >= 1_000_000_000 {
        write!(f, "{:.3}s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        write!(f, "{:.3}ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        write!(f, "{:.3}us", ns as f64 / 1e3)
    } else {
        write!(f, "{ns}ns")
    }
}

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize)]
        pub struct $name(pub $inner);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// A tenant: a VM or container sharing the device.
    TenantId, u16);
id_type!(
    /// A workload job (one fio job clone).
    JobId, u32);
id_type!(
    /// A request in flight; an index into the simulator's request slab.
    ReqId, u32);
id_type!(
    /// A logical page (one mapping unit) of the device's logical space.
    Lpn, u32);
id_type!(
    /// A physical mapping-unit slot on flash: (flash page × units per page + unit index).
    Ppa, u32);
id_type!(
    /// An NVMe submission/completion queue pair.
    QueueId, u16);
id_type!(
    /// A translation page of DFTL's on-flash L2P table: the entries of consecutive logical pages.
    MapPage, u32);
id_type!(
    /// A slot of the device's DRAM write buffer (one mapping unit).
    BufferSlot, u32);
id_type!(
    /// A die (LUN) of the flash array: what reads, programs and erases. Dies are numbered
    /// channel-major: (channel × chips per channel + chip) × dies per chip + die in chip.
    DieId, u32);
id_type!(
    /// A plane of the flash array, numbered die-major: die × planes per die + plane in die.
    PlaneId, u32);
id_type!(
    /// A channel: the bus the dies on it share.
    ChannelId, u32);
id_type!(
    /// Where in the flash a host write's data goes when the drive places data (NVMe FDP's reclaim
    /// unit handle, or the stream resource of the Streams directive): each placement has its own
    /// open block in every plane (`ftl/core/alloc.rs`). 0 is the default, and the only one on a
    /// drive without placement.
    Placement, u16);

/// `s` as it is shown in a message: control characters escaped (`\0`, `\t`, `\u{1b}`), so that
/// a NUL or an escape sequence in a value is seen rather than hidden (or acted on) by the terminal.
pub fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Error from parsing a unit string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text is not a value of this kind.
    #[error("invalid {what} '{}': expected {expected}", shown(.value))]
    Invalid { what: &'static str, value: String, expected: &'static str },
    /// A well-formed value that does not fit in 64 bits once its unit is applied.
    #[error("{what} '{}' is too large: the largest is {largest}", shown(.value))]
    TooLarge { what: &'static str, value: String, largest: &'static str },
}

const SIZE_EXPECTED: &str =
    "a size such as 4096, 4k, 64KiB, 8GiB (binary) or 256GB (decimal)";
const DURATION_EXPECTED: &str = "a duration with a unit such as 500ns, 65us, 0.55ms, 1.5ms, 10s or 2m";
const RATE_EXPECTED: &str = "a transfer rate such as 400MB/s, 1.2GB/s or 800MiB/s";
const SIZE_LARGEST: &str = "18446744073709551615 bytes (16 EiB - 1)";
const DURATION_LARGEST: &str = "18446744073.709551615s (2^64 - 1 ns, about 584 years)";
const RATE_LARGEST: &str = "18446744073709551615 bytes/s";

/// Why a number times its unit is not a value.
enum Scale {
    /// Not a number of the accepted form (or not a whole number of the base unit).
    Malformed,
    /// Beyond 2^64 - 1.
    Overflow,
}

/// Parses a size in bytes. Plain integers are bytes. Single-letter suffixes `k`, `m`, `g`, `t`
/// (any case) and IEC suffixes `KiB`, `MiB`, `GiB`, `TiB` are binary (as fio's default
/// `kb_base=1024` reads `4k`); SI suffixes with a `B` — `kB`, `KB`, `MB`, `GB`, `TB` — are decimal,
/// as drive capacities are quoted. Fractions are allowed with a suffix (`1.5GiB`) if the result is
/// a whole number of bytes.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Invalid { what: "size", value: s.to_string(), expected: SIZE_EXPECTED };
    let (num, suffix) = split_number(s).ok_or_else(err)?;
    let mult: u64 = match suffix {
        "" | "b" | "B" => 1,
        "k" | "K" | "KiB" | "kiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        "t" | "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(err()),
    };
    scale(num, mult).map_err(|e| match e {
        Scale::Malformed => err(),
        Scale::Overflow => UnitError::TooLarge { what: "size", value: s.to_string(), largest: SIZE_LARGEST },
    })
}

/// Parses a duration; a unit is required (`ns`, `us`, `ms`, `s`, `m`, `h`).
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    let err = || UnitError::Invalid { what: "duration", value: s.to_string(), expected: DURATION_EXPECTED };
    let (num, suffix) = split_number(s).ok_or_else(err)?;
    let mult: u64 = match suffix {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(err()),
    };
    scale(num, mult).map(Nanos).map_err(|e| match e {
        Scale::Malformed => err(),
        Scale::Overflow => UnitError::TooLarge { what: "duration", value: s.to_string(), largest: DURATION_LARGEST },
    })
}

/// Parses a transfer rate in bytes per second: a size followed by `/s`.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Invalid { what: "rate", value: s.to_string(), expected: RATE_EXPECTED };
    let t = s.trim();
    let size = t.strip_suffix("/s").ok_or_else(err)?;
    match parse_size(size) {
        Ok(0) | Err(UnitError::Invalid { .. }) => Err(err()),
        Err(UnitError::TooLarge { .. }) => Err(UnitError::TooLarge { what: "rate", value: s.to_string(), largest: RATE_LARGEST }),
        Ok(v) => Ok(v),
    }
}

/// Splits `"1.5 GiB"` into the number (`"1.5"`) and the unit (`"GiB"`), both trimmed; None if there
/// is no number.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    (!num.is_empty()).then(|| (num, suffix.trim()))
}

/// `num` (decimal digits with at most one '.') times `mult`, exactly.
fn scale(num: &str, mult: u64) -> Result<u64, Scale> {
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) || frac.len() > 18 {
        return Err(Scale::Malformed);
    }
    // Digits only here (split_number): a parse failure is a number beyond u128.
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| Scale::Overflow)? };
    let frac_v: u128 = if frac.is_empty() { 0 } else { frac.parse().map_err(|_| Scale::Malformed)? };
    let denom = 10u128.pow(frac.len() as u32);
    if frac_v * mult as u128 % denom != 0 {
        return Err(Scale::Malformed);
    }
    let total = int_v.checked_mul(mult as u128).ok_or(Scale::Overflow)? + frac_v * mult as u128 / denom;
    u64::try_from(total).map_err(|_| Scale::Overflow)
}

/// Formats a byte count the way people read drive sizes: `8.00 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("256GB").unwrap(), 256_000_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size(" 2m ").unwrap(), 2 << 20);
        for bad in ["", "k", "4q", "1.2.3k", "-4k", "0.3B", "99999999999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("65us").unwrap(), Nanos(65_000));
        assert_eq!(parse_duration("0.55ms").unwrap(), Nanos(550_000));
        assert_eq!(parse_duration("1.5ms").unwrap(), Nanos(1_500_000));
        assert_eq!(parse_duration("10s").unwrap(), Nanos(10_000_000_000));
        assert_eq!(parse_duration("2m").unwrap(), Nanos(120_000_000_000));
        assert_eq!(parse_duration("500ns").unwrap(), Nanos(500));
        for bad in ["", "10", "1.5", "ms", "3 parsecs", "0.5ns"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("10").unwrap_err().to_string().contains("expected a duration"));
    }

    #[test]
    fn values_in_messages_show_control_characters_escaped() {
        assert_eq!(shown("wr\0ite"), "wr\\0ite");
        assert_eq!(shown("a\tb\x1b\u{7f}"), "a\\tb\\u{1b}\\u{7f}");
        assert_eq!(shown("plain 'text' ünïcode"), "plain 'text' ünïcode");
        assert_eq!(parse_size("4\0k").unwrap_err().to_string(), format!("invalid size '4\\0k': expected {SIZE_EXPECTED}"));
    }

    #[test]
    fn values_too_large_say_so_and_give_the_largest() {
        assert_eq!(
            parse_duration("18446744074s").unwrap_err().to_string(),
            "duration '18446744074s' is too large: the largest is 18446744073.709551615s (2^64 - 1 ns, about 584 years)"
        );
        assert_eq!(parse_duration("18446744073.709551615s").unwrap(), Nanos(u64::MAX));
        assert!(parse_duration(&format!("1{}ns", "0".repeat(50))).unwrap_err().to_string().contains("is too large"));
        assert_eq!(
            parse_size("99999999999999999999T").unwrap_err().to_string(),
            "size '99999999999999999999T' is too large: the largest is 18446744073709551615 bytes (16 EiB - 1)"
        );
        assert!(parse_rate("20000000000GB/s").unwrap_err().to_string().starts_with("rate '20000000000GB/s' is too large: the largest is 18446744073709551615 bytes/s"));
        // Malformed stays malformed.
        assert!(parse_duration("1.2.3s").unwrap_err().to_string().starts_with("invalid duration"));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("400MB/s").unwrap(), 400_000_000);
        assert_eq!(parse_rate("1.2GB/s").unwrap(), 1_200_000_000);
        assert!(parse_rate("400MB").is_err());
        assert!(parse_rate("0MB/s").is_err());
    }

    #[test]
    fn transfer_time_rounds_up() {
        assert_eq!(Nanos::for_transfer(4096, 400_000_000), Nanos(10_240));
        assert_eq!(Nanos::for_transfer(1, 3), Nanos(333_333_334));
        assert_eq!(Nanos::for_transfer(0, 3), Nanos(0));
    }

    #[test]
    fn time_arithmetic_saturates() {
        assert_eq!(SimTime(5).since(SimTime(9)), Nanos::ZERO);
        assert_eq!(SimTime(u64::MAX) + Nanos(1), SimTime(u64::MAX));
        assert_eq!(Nanos(3) - Nanos(5), Nanos::ZERO);
    }
}
