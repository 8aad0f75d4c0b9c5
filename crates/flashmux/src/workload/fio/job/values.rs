//! Values of fio's options that are more than a number: `bssplit`, `random_distribution` (with
//! `zoned` and `zoned_abs` zones), and per-direction lists (`bs=4k,8k`), with fio's rules for
//! blanks and percentages (`options.c`: `bssplit_ddir`, `parse_zoned_distribution`).

use super::options::Opt;
use super::*;

/// Spreads up to three comma-separated components over the directions: component `i` sets
/// direction `i`, the last non-empty trailing component also sets the remaining directions, an
/// empty component leaves its direction alone. `None` if a component does not parse or there are
/// more than three.
pub(super) fn assign_per_dir<T: Clone>(
    comps: &[&str],
    parse: impl Fn(&str) -> Option<T>,
) -> Option<PerDir<Option<T>>> {
    if comps.len() > 3 {
        return None;
    }
    let mut out = PerDir::splat(None);
    for (i, comp) in comps.iter().enumerate() {
        if comp.is_empty() {
            continue;
        }
        let value = parse(comp)?;
        let last = i + 1 == comps.len();
        for dir in &Dir::ALL[i..if last { 3 } else { i + 1 }] {
            out[*dir] = Some(value.clone());
        }
    }
    Some(out)
}

pub(super) fn merge<T>(target: &mut PerDir<T>, values: PerDir<Option<T>>) {
    let PerDir { read, write, trim } = values;
    for (dir, value) in Dir::ALL.into_iter().zip([read, write, trim]) {
        if let Some(v) = value {
            target[dir] = v;
        }
    }
}

impl<T> PerDir<T> {
    pub(super) fn map<U>(self, f: impl Fn(T) -> U) -> PerDir<U> {
        PerDir {
            read: f(self.read),
            write: f(self.write),
            trim: f(self.trim),
        }
    }
}

/// fio allows at most 64 `bssplit` entries (`BSSPLIT_MAX`) and 256 zones (`ZONESPLIT_MAX`) per
/// direction.
pub(super) const BSSPLIT_MAX: usize = 64;
pub(super) const ZONESPLIT_MAX: usize = 256;

/// Fills blank percentages the way fio does (`bssplit_ddir`, `zone_split_ddir`): the rest of
/// 100 is divided evenly, rounding down; a single blank entry gets 100.
pub(super) fn fill_blanks(percents: &mut [Option<u32>]) -> Option<()> {
    let given: u32 = percents.iter().flatten().sum();
    let blanks = percents.iter().filter(|p| p.is_none()).count() as u32;
    if given > 100 || (blanks == 0 && given != 100) {
        return None;
    }
    for p in percents.iter_mut().filter(|p| p.is_none()) {
        *p = Some((100 - given) / blanks);
    }
    Some(())
}

/// One direction's `bssplit`: `bs[/percent]` entries separated by `:`. As in fio, a percentage
/// of 0 counts as blank. fio itself rejects a total above 100 only when more than one entry is
/// blank, and gives whatever is missing from 100 to the most frequent size; here, following the
/// HOWTO ("The percentages always add up to 100"), the given percentages may not exceed 100 and,
/// with no blank entry, must add up to exactly 100. An entry written with 0 that fio would give a
/// share to (all zeros, or zeros beside percentages short of 100) is an error: it would run the
/// opposite of what was written. `Err(Some(what))` says what was expected when more can be said
/// than the option's general form.
pub(super) fn parse_bssplit(text: &str, kb: KbBase) -> Result<Vec<BsSplit>, Option<String>> {
    let mut sizes = Vec::new();
    let mut percents = Vec::new();
    let mut zeros = Vec::new();
    for entry in text.split(':') {
        let (bs, percent) = match entry.split_once('/') {
            Some((bs, p)) => (bs, Some(p)),
            None => (entry, None),
        };
        sizes.push(units::parse_size(bs, kb).filter(|&v| v > 0).ok_or(None)?);
        let p = match percent {
            None | Some("") => None,
            Some(p) => Some(p.parse::<u32>().ok().filter(|&v| v <= 100).ok_or(None)?),
        };
        zeros.push(p == Some(0));
        percents.push(p.filter(|&v| v > 0));
    }
    if sizes.len() > BSSPLIT_MAX {
        return Err(None);
    }
    fill_blanks(&mut percents).ok_or(None)?;
    if zeros.iter().all(|&z| z) {
        return Err(Some(
            "at least one percentage above 0 (fio reads a percentage of 0 as blank and would split the I/Os evenly; \
             leave the percentages blank, as 4k/:8k/, for that)"
                .into(),
        ));
    }
    let entries: Vec<&str> = text.split(':').collect();
    if let Some(i) = (0..sizes.len()).find(|&i| zeros[i] && percents[i] != Some(0)) {
        return Err(Some(format!(
            "percentages that add up to 100 (fio reads {} as blank and would give it {}% of the I/Os; give it its share, or leave it out)",
            entries[i],
            percents[i].unwrap_or(0)
        )));
    }
    let mut split: Vec<BsSplit> = sizes
        .into_iter()
        .zip(percents)
        .map(|(bs, p)| BsSplit {
            bs,
            percent: p.unwrap_or(0),
        })
        .collect();
    // fio keeps the entries sorted by ascending percentage; selection walks them in this order.
    split.sort_by_key(|s| s.percent);
    Ok(split)
}

pub(super) fn parse_distribution(o: &Opt<'_>) -> Result<RandomDistribution, FioError> {
    const EXPECTED: &str = "random, zipf[:theta[:center]], pareto[:h[:center]], \
                            normal[:deviation[:center]], zoned:<access%>/<size%>:... or \
                            zoned_abs:<access%>/<size>:...";
    let text = o.text(EXPECTED)?;
    let (kind, params) = match text.split_once(':') {
        Some((k, p)) => (k, Some(p)),
        None => (text, None),
    };
    if let Some(d) = parse_skewed(o, kind, params)? {
        return Ok(d);
    }
    Ok(match kind {
        "random" if params.is_none() => RandomDistribution::Random,
        "zoned" | "zoned_abs" => {
            let absolute = kind == "zoned_abs";
            let expected = if absolute {
                "zoned_abs:<access%>/<size>:... such as zoned_abs:60/20G:30/100G:10/500G, \
                 access percentages adding up to 100, per direction"
            } else {
                "zoned:<access%>/<size%>:... such as zoned:60/10:30/20:8/30:2/40, access \
                 percentages adding up to 100 and sizes to at most 100, per direction"
            };
            let comps: Vec<&str> = params
                .ok_or_else(|| o.invalid(expected))?
                .split(',')
                .collect();
            if absolute {
                let zones = assign_per_dir(&comps, |c| parse_abs_zones(c, o.kb))
                    .ok_or_else(|| o.invalid(expected))?;
                RandomDistribution::ZonedAbs(zones.map(Option::unwrap_or_default))
            } else {
                let zones =
                    assign_per_dir(&comps, parse_zones).ok_or_else(|| o.invalid(expected))?;
                RandomDistribution::Zoned(zones.map(Option::unwrap_or_default))
            }
        }
        _ => return Err(o.invalid(EXPECTED)),
    })
}

/// Access percentages must be given and add up to exactly 100 (fio refuses both more and less);
/// sizes may be blank (sharing the rest) and add up to at most 100, leaving the tail of the region
/// unused if less (fio's `zone_split_ddir`).
pub(super) fn zone_entries(text: &str) -> Option<Vec<(u32, &str)>> {
    let mut entries = Vec::new();
    for entry in text.split(':') {
        let (access, size) = entry.split_once('/').unwrap_or((entry, ""));
        entries.push((access.parse::<u32>().ok().filter(|&v| v <= 100)?, size));
    }
    let total: u32 = entries.iter().map(|e| e.0).sum();
    (total == 100 && entries.len() <= ZONESPLIT_MAX).then_some(entries)
}

pub(super) fn parse_zones(text: &str) -> Option<Vec<Zone>> {
    let entries = zone_entries(text)?;
    let mut sizes: Vec<Option<u32>> = Vec::new();
    for (_, size) in &entries {
        sizes.push(match *size {
            "" => None,
            s => Some(s.parse::<u32>().ok().filter(|&v| v <= 100)?).filter(|&v| v > 0),
        });
    }
    let given: u32 = sizes.iter().flatten().sum();
    let blanks = sizes.iter().filter(|s| s.is_none()).count() as u32;
    if given > 100 {
        return None;
    }
    Some(
        entries
            .iter()
            .zip(sizes)
            .map(|(&(access_percent, _), size)| Zone {
                access_percent,
                size_percent: size.unwrap_or((100 - given) / blanks.max(1)),
            })
            .collect(),
    )
}

pub(super) fn parse_abs_zones(text: &str, kb: KbBase) -> Option<Vec<AbsZone>> {
    zone_entries(text)?
        .into_iter()
        .map(|(access_percent, size)| {
            Some(AbsZone {
                access_percent,
                size: units::parse_size(size, kb).filter(|&v| v > 0)?,
            })
        })
        .collect()
}

/// fio's skewed distributions with their optional parameter and center (`zipf[:theta[:center]]`,
/// `pareto[:h[:center]]`, `normal[:deviation[:center]]`), shared by `random_distribution` and
/// `file_service_type`; `None` for any other kind.
pub(super) fn parse_skewed(
    o: &Opt<'_>,
    kind: &str,
    params: Option<&str>,
) -> Result<Option<RandomDistribution>, FioError> {
    // fio's defaults: FIO_DEF_ZIPF 1.1, FIO_DEF_PARETO 0.2, normal 0.
    let value_and_center = |default: f64, expected: &str| -> Result<(f64, Option<f64>), FioError> {
        let Some(params) = params else {
            return Ok((default, None));
        };
        let (value, center) = match params.split_once(':') {
            Some((v, c)) => (v, Some(c)),
            None => (params, None),
        };
        let value = units::parse_f64(value).ok_or_else(|| o.invalid(expected))?;
        let center = match center {
            None => None,
            Some(c) => Some(
                units::parse_f64(c)
                    .filter(|c| (0.0..=1.0).contains(c))
                    .ok_or_else(|| o.invalid("a distribution center from 0 to 1"))?,
            ),
        };
        Ok((value, center))
    };
    Ok(Some(match kind {
        "zipf" => {
            const E: &str = "zipf:<theta>, theta >= 0 and not 1, e.g. zipf:1.2";
            let (theta, center) = value_and_center(1.1, E)?;
            if theta < 0.0 || theta == 1.0 {
                return Err(o.invalid(E));
            }
            RandomDistribution::Zipf { theta, center }
        }
        "pareto" => {
            const E: &str = "pareto:<h>, 0 < h < 1, e.g. pareto:0.2";
            let (h, center) = value_and_center(0.2, E)?;
            if h <= 0.0 || h >= 1.0 {
                return Err(o.invalid(E));
            }
            RandomDistribution::Pareto { h, center }
        }
        "normal" => {
            const E: &str = "normal:<deviation %>, 0 <= deviation < 100, e.g. normal:5";
            let (deviation, center) = value_and_center(0.0, E)?;
            if !(0.0..100.0).contains(&deviation) {
                return Err(o.invalid(E));
            }
            RandomDistribution::Normal { deviation, center }
        }
        _ => return Ok(None),
    }))
}

/// A section's data placement options as given. fio keeps them apart while parsing and settles
/// them once the job's options are all in (`fixup_options`), which is what
/// [`FioJob::finish`] does with these.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PlacementOptions {
    /// `fdp=1`.
    pub(super) fdp: bool,
    /// `dataplacement=` when given: `Some(None)` is `none`.
    pub(super) kind: Option<Option<PlacementKind>>,
    /// `plids=`, sorted.
    pub(super) ids: Option<Vec<u16>>,
    /// `plid_select=` when given.
    pub(super) select: Option<SelectName>,
    /// `dp_scheme=`'s entries, at most [`DP_MAX_SCHEME_ENTRIES`].
    pub(super) scheme: Option<Vec<SchemeEntry>>,
}

impl PlacementOptions {
    /// Any of `plids`, `plid_select` and `dp_scheme` was given.
    pub(super) fn any_detail(&self) -> bool {
        self.ids.is_some() || self.select.is_some() || self.scheme.is_some()
    }
}

/// `plid_select`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SelectName {
    RoundRobin,
    Random,
    Scheme,
}

pub(super) const EXPECT_PLIDS: &str = "a comma-separated list of IDs or ranges such as 1,2-4,5";

/// `plids` as fio's `str_fdp_pli_cb` reads it: comma-separated values or `start-end` ranges,
/// each number as C's `strtoull` with base 0 reads it (`0x10` is hex, `010` octal), blanks
/// around numbers ignored; at most [`FIO_MAX_DP_IDS`] IDs, none above 0xFFFF, sorted ascending
/// (duplicates kept). `Err` says what was expected.
///
/// Where fio reads a malformed list without complaint, it is an error here: fio stops at an
/// empty entry (`1,,3` is `1`), reads garbage as 0 (`x` is 0) and a range with one end
/// (`-3`, `3-`) or three (`1-2-3`) in ways nobody would write on purpose. A trailing comma
/// (`1,2,`) means what fio makes of it and is accepted. Numbers fio would truncate to 32 bits
/// before checking them are above 0xFFFF here.
pub(super) fn parse_plids(text: &str) -> Result<Vec<u16>, String> {
    let entries: Vec<&str> = text.strip_suffix(',').unwrap_or(text).split(',').collect();
    let mut ids: Vec<u16> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            let read: Vec<String> = entries[..i].iter().map(|e| e.trim().to_string()).collect();
            return Err(format!(
                "{EXPECT_PLIDS}, without empty entries (fio stops reading the list at one{})",
                if read.is_empty() { String::new() } else { format!(" and would use {} only", read.join(",")) }
            ));
        }
        let ends: Vec<&str> = entry.split('-').map(str::trim).collect();
        let number = |t: &str| {
            parse_c_ulong(t).ok_or_else(|| format!("{EXPECT_PLIDS} ('{t}' is not a number; hex 0x.. and octal 0.. are allowed)"))
        };
        let (start, end) = match ends[..] {
            [one] => (number(one)?, number(one)?),
            [start, end] if !start.is_empty() && !end.is_empty() => (number(start)?, number(end)?),
            _ => return Err(format!("{EXPECT_PLIDS} ('{entry}' is not a value or a start-end range)")),
        };
        if start > end {
            return Err(format!("{EXPECT_PLIDS} (the range {entry} starts after it ends)"));
        }
        for id in start..=end {
            if ids.len() >= FIO_MAX_DP_IDS {
                return Err(format!("{EXPECT_PLIDS}: only {FIO_MAX_DP_IDS} IDs supported"));
            }
            let id = u16::try_from(id).map_err(|_| format!("{EXPECT_PLIDS}: Placement IDs cannot exceed 0xFFFF"))?;
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// A number as C's `strtoull(text, NULL, 0)` reads a whole string: an optional `+`, then `0x`
/// and hex digits, `0` and octal digits, or decimal digits. `None` for anything else,
/// including trailing characters `strtoull` would stop at, and values beyond 64 bits.
pub(super) fn parse_c_ulong(text: &str) -> Option<u64> {
    let t = text.strip_prefix('+').unwrap_or(text);
    let (digits, radix) = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (hex, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A `dp_scheme` file's entries (HOWTO, "dp_scheme"): lines of `start, end, pli`, decimal
/// byte offsets and a placement ID up to 65535, as fio's `fscanf("%llu,%llu,%hu\n")` reads
/// them: blanks before a number and blank lines are fine; nothing may come between a number
/// and its comma. fio stops reading at the first line that does not match and ignores it and
/// the rest; here such a line is an error (`Err((line, what))`) rather than a silently
/// shorter scheme. Returns every entry; the caller keeps the first [`DP_MAX_SCHEME_ENTRIES`].
pub(super) fn parse_scheme(text: &str) -> Result<Vec<(usize, SchemeEntry)>, (usize, String)> {
    let decimal = |t: &str| -> Option<u64> {
        let t = t.trim_start();
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten()
    };
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        let parsed = match fields[..] {
            [start, end, pli] => decimal(start).zip(decimal(end)).zip(decimal(pli.trim_end())),
            _ => None,
        };
        let Some(((start, end), pli)) = parsed else {
            return Err((
                i + 1,
                format!(
                    "'{}' is not 'start, end, pli' (decimal numbers, nothing between a number and its comma; fio stops reading the scheme at such a line)",
                    crate::units::shown(line)
                ),
            ));
        };
        let pli = u16::try_from(pli).map_err(|_| (i + 1, format!("placement ID {pli} is above 65535")))?;
        entries.push((i + 1, SchemeEntry { start, end, pli }));
    }
    Ok(entries)
}
