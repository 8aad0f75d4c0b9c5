//! Value syntax shared by fio options: sizes with unit prefixes, percentages, times, booleans.
//!
//! The rules are those of fio's HOWTO, section "Parameter types" (`int`, `time`, `bool`) and the
//! `kb_base` option. fio's own parser is far more permissive than its documentation (it reads
//! `4q` as 4 bytes, `1.5g` as 1 byte and an unknown time suffix as microseconds); these functions
//! accept exactly the documented forms and reject everything else, so a typo becomes an error
//! instead of a silently different workload.

/// What `kb_base` says a unit prefix means (HOWTO, "kb_base"). fio's default is 1024, its
/// "compatibility mode", in which the SI-looking prefixes (`k`, `m`, ...) are powers of two and the
/// IEC-looking ones (`Ki`, `Mi`, ...) are powers of ten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KbBase {
    K1024,
    K1000,
}

/// A size that may instead be given as a percentage of the space (`size=20%`, `offset=10%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quantity {
    Bytes(u64),
    Percent(u32),
}

/// Parses an fio integer with an optional size suffix: `4096`, `4k`, `4kb`, `4KiB`, `0x1000`.
///
/// Suffixes are case-insensitive, a trailing `b`/`B` means bytes (never bits). With
/// `kb_base=1024` `k`/`kb` is 1024 and `ki`/`kib` is 1000; with `kb_base=1000` it is the other way
/// round (HOWTO, "int"; its examples list `4ki` and `1mi` with the same meaning as `4kib` and
/// `1mib`, which is what is implemented here). Hexadecimal values take no suffix.
pub(crate) fn parse_size(text: &str, kb_base: KbBase) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    let (number, suffix) = split_number(text)?;
    number.checked_mul(size_multiplier(suffix, kb_base)?)
}

/// Like [`parse_size`], but also accepts a percentage between 1 and 100 (HOWTO, "size" and
/// "offset": "A percentage can be specified by a number between 1 and 100 followed by '%'").
pub(crate) fn parse_quantity(text: &str, kb_base: KbBase) -> Option<Quantity> {
    if let Some(percent) = text.strip_suffix('%') {
        let (number, rest) = split_number(percent)?;
        return match (rest, number) {
            ("", 1..=100) => Some(Quantity::Percent(number as u32)),
            _ => None,
        };
    }
    parse_size(text, kb_base).map(Quantity::Bytes)
}

/// Parses an fio time value and returns nanoseconds. `default_unit_ns` is the unit of a bare
/// number: seconds for `runtime`, `ramp_time` and `startdelay`, microseconds for `thinktime`.
///
/// The suffixes are the HOWTO's list ("Parameter types", "time"), case-insensitive: `d`, `h`, `m`
/// (minutes), `s`/`sec`, `ms`/`msec`, `us`/`usec`.
pub(crate) fn parse_time_ns(text: &str, default_unit_ns: u64) -> Option<u64> {
    let (number, suffix) = split_number(text)?;
    number.checked_mul(time_unit(suffix, default_unit_ns)?)
}

/// Nanoseconds per unit of a time suffix; `default_unit_ns` for none.
fn time_unit(suffix: &str, default_unit_ns: u64) -> Option<u64> {
    Some(match suffix.to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        "d" => 86_400 * 1_000_000_000,
        _ => return None,
    })
}

/// The largest size, as messages give it.
pub(crate) const SIZE_LARGEST: &str = "18446744073709551615 bytes (16 EiB - 1)";
/// The largest time, as messages give it.
pub(crate) const TIME_LARGEST: &str = "18446744073709551615 ns (about 584 years)";

/// Whether `text` is a size of the form [`parse_size`] reads whose value is beyond 2^64 - 1.
pub(crate) fn size_too_large(text: &str, kb_base: KbBase) -> bool {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) && u64::from_str_radix(hex, 16).is_err();
    }
    let Some((digits, suffix)) = split_digits(text) else { return false };
    let Some(mult) = size_multiplier(suffix, kb_base) else { return false };
    product_overflows(digits, mult)
}

/// Whether `text` is a time of the form [`parse_time_ns`] reads whose value in nanoseconds is
/// beyond 2^64 - 1.
pub(crate) fn time_too_large(text: &str, default_unit_ns: u64) -> bool {
    let Some((digits, suffix)) = split_digits(text) else { return false };
    let Some(unit) = time_unit(suffix, default_unit_ns) else { return false };
    product_overflows(digits, unit)
}

/// Leading ASCII digits and the rest; `None` without digits.
fn split_digits(text: &str) -> Option<(&str, &str)> {
    let n = text.bytes().take_while(u8::is_ascii_digit).count();
    (n > 0).then(|| text.split_at(n))
}

/// Whether the decimal `digits` times `mult` is beyond 2^64 - 1.
fn product_overflows(digits: &str, mult: u64) -> bool {
    match digits.parse::<u64>() {
        Ok(n) => n.checked_mul(mult).is_none(),
        Err(_) => true,
    }
}

/// fio's `bool` type: "only defined for true and false (1 and 0)".
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A finite floating-point number (distribution parameters).
pub(crate) fn parse_f64(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Splits `123abc` into `(123, "abc")`; `None` if there are no leading digits or they overflow.
fn split_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    Some((text[..digits].parse().ok()?, &text[digits..]))
}

fn size_multiplier(suffix: &str, kb_base: KbBase) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    let (power, iec) = match lower.as_str() {
        "" | "b" => return Some(1),
        "k" | "kb" => (1, false),
        "m" | "mb" => (2, false),
        "g" | "gb" => (3, false),
        "t" | "tb" => (4, false),
        "p" | "pb" => (5, false),
        "ki" | "kib" => (1, true),
        "mi" | "mib" => (2, true),
        "gi" | "gib" => (3, true),
        "ti" | "tib" => (4, true),
        "pi" | "pib" => (5, true),
        _ => return None,
    };
    let base: u64 = match (kb_base, iec) {
        (KbBase::K1024, false) | (KbBase::K1000, true) => 1024,
        (KbBase::K1024, true) | (KbBase::K1000, false) => 1000,
    };
    base.checked_pow(power)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn size(text: &str) -> Option<u64> {
        parse_size(text, KbBase::K1024)
    }

    #[test]
    fn si_prefixes_are_powers_of_two_by_default() {
        for text in ["4k", "4kb", "4K", "4KB", "4kB", "4096", "4096b", "4096B"] {
            assert_eq!(size(text), Some(4096), "{text}");
        }
        assert_eq!(size("1m"), Some(1 << 20));
        assert_eq!(size("1024k"), Some(1 << 20));
        assert_eq!(size("1g"), Some(1 << 30));
        assert_eq!(size("1t"), Some(1 << 40));
        assert_eq!(size("1024g"), Some(1 << 40));
        assert_eq!(size("1p"), Some(1 << 50));
    }

    #[test]
    fn iec_prefixes_are_inverted_in_compatibility_mode() {
        // HOWTO, "int", examples with kb_base=1024: "1 MB: 1000000, 1mi, 1000ki".
        assert_eq!(size("4KiB"), Some(4000));
        assert_eq!(size("4kib"), Some(4000));
        assert_eq!(size("4ki"), Some(4000));
        assert_eq!(size("1mi"), Some(1_000_000));
        assert_eq!(size("1000ki"), Some(1_000_000));
        assert_eq!(size("1ti"), Some(1_000_000_000_000));
    }

    #[test]
    fn kb_base_1000_uses_true_prefixes() {
        let k = |t| parse_size(t, KbBase::K1000);
        assert_eq!(k("4k"), Some(4000));
        assert_eq!(k("1m"), Some(1_000_000));
        for text in ["4096", "4ki", "4kib", "4KiB", "4Ki"] {
            assert_eq!(k(text), Some(4096), "{text}");
        }
        assert_eq!(k("1mi"), Some(1 << 20));
        assert_eq!(k("1024ki"), Some(1 << 20));
        assert_eq!(k("1048576mi"), Some(1 << 40));
    }

    #[test]
    fn hexadecimal_sizes() {
        assert_eq!(size("0x1000"), Some(4096));
        assert_eq!(size("0XfF"), Some(255));
        assert_eq!(size("0x"), None);
        assert_eq!(size("0x1g"), None);
    }

    #[test]
    fn malformed_sizes_are_rejected() {
        for text in [
            "",
            "k",
            "4q",
            "4kk",
            "1.5g",
            "-4k",
            "+4k",
            " 4k",
            "4 k",
            "99999999999p",
            "4e",
        ] {
            assert_eq!(size(text), None, "{text}");
        }
        assert_eq!(size("18446744073709551615"), Some(u64::MAX));
        assert_eq!(size("18446744073709551616"), None);
    }

    #[test]
    fn percentages() {
        assert_eq!(
            parse_quantity("20%", KbBase::K1024),
            Some(Quantity::Percent(20))
        );
        assert_eq!(
            parse_quantity("100%", KbBase::K1024),
            Some(Quantity::Percent(100))
        );
        assert_eq!(
            parse_quantity("4k", KbBase::K1024),
            Some(Quantity::Bytes(4096))
        );
        for text in ["0%", "101%", "%", "4k%", "20 %"] {
            assert_eq!(parse_quantity(text, KbBase::K1024), None, "{text}");
        }
    }

    #[test]
    fn time_suffixes_and_default_units() {
        assert_eq!(parse_time_ns("10", S), Some(10 * S));
        assert_eq!(parse_time_ns("10", 1_000), Some(10_000));
        for text in ["10s", "10sec", "10S", "10SEC"] {
            assert_eq!(parse_time_ns(text, 1_000), Some(10 * S), "{text}");
        }
        assert_eq!(parse_time_ns("100ms", S), Some(100_000_000));
        assert_eq!(parse_time_ns("100msec", S), Some(100_000_000));
        assert_eq!(parse_time_ns("100MS", S), Some(100_000_000));
        assert_eq!(parse_time_ns("5us", S), Some(5_000));
        assert_eq!(parse_time_ns("5usec", S), Some(5_000));
        assert_eq!(parse_time_ns("2m", S), Some(120 * S));
        assert_eq!(parse_time_ns("2M", S), Some(120 * S));
        assert_eq!(parse_time_ns("1h", S), Some(3_600 * S));
        assert_eq!(parse_time_ns("1d", S), Some(86_400 * S));
        for text in [
            "",
            "s",
            "10min",
            "10x",
            "1.5s",
            "10ns",
            "-1",
            "99999999999999d",
        ] {
            assert_eq!(parse_time_ns(text, S), None, "{text}");
        }
    }

    #[test]
    fn booleans_and_floats() {
        assert_eq!(parse_bool("1"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        for text in ["2", "yes", "true", ""] {
            assert_eq!(parse_bool(text), None, "{text}");
        }
        assert_eq!(parse_f64("1.2"), Some(1.2));
        assert_eq!(parse_f64("inf"), None);
        assert_eq!(parse_f64("NaN"), None);
        assert_eq!(parse_f64("x"), None);
    }
}
