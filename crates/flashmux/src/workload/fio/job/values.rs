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
