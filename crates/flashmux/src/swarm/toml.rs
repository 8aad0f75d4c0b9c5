//! A small writer of scenario TOML: sections in the order they were first used, keys in the
//! order they were set, `[[tenant]]` tables appended as they come.

use std::fmt::Write as _;

/// A TOML document under construction.
#[derive(Default)]
pub(super) struct Doc {
    /// Top-level keys (before any table).
    top: Vec<(String, String)>,
    /// Tables, by header, in order of first use.
    tables: Vec<(String, Vec<(String, String)>)>,
    /// `[[tenant]]` entries.
    tenants: Vec<Vec<(String, String)>>,
}

impl Doc {
    /// Sets a top-level key to a TOML literal.
    pub fn top(&mut self, key: &str, literal: String) {
        self.top.push((key.to_string(), literal));
    }

    /// Sets `key` of table `table` (`device.geometry`) to a TOML literal.
    pub fn set(&mut self, table: &str, key: &str, literal: String) {
        let t = match self.tables.iter().position(|(h, _)| h == table) {
            Some(i) => i,
            None => {
                self.tables.push((table.to_string(), Vec::new()));
                self.tables.len() - 1
            }
        };
        self.tables[t].1.push((key.to_string(), literal));
    }

    /// Appends a `[[tenant]]` table.
    pub fn tenant(&mut self, keys: Vec<(String, String)>) {
        self.tenants.push(keys);
    }

    /// The document's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.top {
            let _ = writeln!(out, "{k} = {v}");
        }
        for (header, keys) in &self.tables {
            let _ = writeln!(out, "\n[{header}]");
            for (k, v) in keys {
                let _ = writeln!(out, "{k} = {v}");
            }
        }
        for keys in &self.tenants {
            out.push_str("\n[[tenant]]\n");
            for (k, v) in keys {
                let _ = writeln!(out, "{k} = {v}");
            }
        }
        out
    }
}

/// A TOML basic string.
pub(super) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML multi-line basic string holding fio job text (which has no backslashes or quotes).
pub(super) fn multiline(s: &str) -> String {
    debug_assert!(!s.contains('\\') && !s.contains("\"\"\""), "fio text needs no escaping");
    format!("\"\"\"\n{s}\"\"\"")
}

/// A float that reads back as at least `x` (rounded up to six decimals).
pub(super) fn float_up(x: f64) -> String {
    let mut millionths = (x * 1e6).ceil();
    loop {
        // Decimal rounding can land just below x: then one millionth more.
        let s = format!("{:.6}", millionths / 1e6);
        if s.parse::<f64>().is_ok_and(|p| p >= x) {
            return s;
        }
        millionths += 1.0;
    }
}

/// A float literal (always with a decimal point, as TOML needs for a float key).
pub(super) fn float(x: f64) -> String {
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

/// Bytes with the largest binary unit that divides them exactly (`64KiB`, `3MiB`, `4097`).
pub(super) fn size(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{name}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A duration in nanoseconds with the largest unit that divides it (`250us`, `3ms`, `17ns`).
pub(super) fn duration(ns: u64) -> String {
    for (unit, name) in [(1_000_000_000u64, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns >= unit && ns % unit == 0 {
            return format!("{}{name}", ns / unit);
        }
    }
    format!("{ns}ns")
}

/// A fio size: `4k`, `1m`, or bytes (fio's `k` is 1024 with the default `kb_base`).
pub(super) fn fio_size(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{name}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A fio time: `250us`, `3ms`, `2s` (fio's bare numbers are seconds or microseconds depending on
/// the option, so a unit is always written).
pub(super) fn fio_time(ns: u64) -> String {
    let us = (ns / 1_000).max(1);
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else if us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(size(65536), "64KiB");
        assert_eq!(size(3 << 20), "3MiB");
        assert_eq!(size(4097), "4097");
        assert_eq!(duration(250_000), "250us");
        assert_eq!(duration(17), "17ns");
        assert_eq!(fio_size(4096), "4k");
        assert_eq!(fio_time(3_000_000), "3ms");
        assert_eq!(float(2.0), "2.0");
        for x in [0.1234567, 1.000001, 2.0 / 3.0, 1e-7, 7.0] {
            assert!(float_up(x).parse::<f64>().unwrap() >= x, "{x}");
        }
        let mut d = Doc::default();
        d.top("seed", "3".into());
        d.set("device", "preset", string("null"));
        d.set("device.null", "latency", string("1us"));
        d.set("device", "capacity", string("1MiB"));
        d.tenant(vec![("name".into(), string("t"))]);
        assert_eq!(
            d.render(),
            "seed = 3\n\n[device]\npreset = \"null\"\ncapacity = \"1MiB\"\n\n[device.null]\nlatency = \"1us\"\n\n[[tenant]]\nname = \"t\"\n"
        );
    }
}
