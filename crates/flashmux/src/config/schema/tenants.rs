//! The `[[tenant]]` tables: each tenant's workload (inline fio, a job file, a personality, a
//! trace, or none: an export), its region of the device and its weight.

use super::*;
use crate::config::PlaceTarget;
use crate::workload::trace::TenantBy;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantSection {
    pub(super) name: Option<String>,
    pub(super) region: Option<RegionValue>,
    /// An integer, but read as any TOML value so that 0, negative and fractional weights get a
    /// clear error rather than a type mismatch.
    pub(super) weight: Option<toml::Value>,
    pub(super) fio: Option<String>,
    pub(super) job_file: Option<String>,
    /// A built-in workload (`workload::personality`) by name.
    pub(super) personality: Option<String>,
    /// A block trace (`config/trace.rs`).
    pub(super) trace: Option<toml::Value>,
    /// A Filebench workload file, or a bundled personality's name.
    pub(super) filebench: Option<String>,
    /// Values for the Filebench workload's variables (`set $name = value` after its own).
    pub(super) filebench_set: Option<toml::Table>,
    /// Its NVMe priority class under weighted round robin arbitration.
    pub(super) priority: Option<Priority>,
    /// Its writes' default data placement: an FDP placement identifier or a stream identifier.
    pub(super) placement: Option<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RegionValue {
    Named(String),
    Range { offset: String, size: String },
}

impl TenantSection {
    /// Its name: as given, or `tenant<i>` for the `i`-th tenant.
    pub(super) fn name_or_default(&self, i: usize) -> String {
        self.name.clone().unwrap_or_else(|| format!("tenant{i}"))
    }
}

/// The drive's placement and, under its `per_tenant`, tenant i's default directive.
pub(super) type DrivePlacement<'a> = (&'a PlacementMode, Option<fn(usize) -> u32>);

/// Partitions made by `region = "auto"` start on this boundary, as partitioning tools align them.
pub(super) const AUTO_REGION_ALIGN: u64 = 1 << 20;

pub(super) fn resolve_tenants(
    ctx: &Ctx,
    ts: &[TenantSection],
    base: &Path,
    capacity: u64,
    ext4: bool,
    collected: &mut Collected,
    placement: DrivePlacement,
) -> Result<Vec<TenantSpec>, ConfigError> {
    if ts.is_empty() {
        return Err(ctx.err("no tenants: add at least one [[tenant]] with a workload (fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\")"));
    }
    // Before any tenant is resolved (each parses a job file).
    if ts.len() > crate::config::limits::MAX_TENANTS {
        return Err(ctx.err(format!("{} tenants: at most {}", ts.len(), crate::config::limits::MAX_TENANTS)));
    }
    let mut out: Vec<TenantSpec> = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        let name = t.name_or_default(i);
        let key = format!("tenant[{i}] ({name})");
        if name.is_empty() || name.contains(|c: char| c.is_control() || c == ',') {
            return Err(ctx.err(format!("{key}.name: must be non-empty, without commas or control characters")));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(ctx.err(format!("{key}.name: '{name}' is used by another tenant")));
        }
        let region = resolve_region(ctx, &key, t.region.as_ref(), (i as u64, ts.len() as u64), capacity)?;
        let weight = resolve_weight(ctx, &key, t.weight.as_ref())?;
        let mut workload = resolve_workload(ctx, &key, &name, t, base, ext4, collected)?;
        let placement = resolve_tenant_placement(ctx, &key, i, t.placement, placement, &mut workload)?;
        out.push(TenantSpec { name, region, weight, workload, domain: i, placement });
    }
    check_overlaps(ctx, &out, capacity)?;
    Ok(out)
}

/// A tenant's default placement directive: its own `placement`, else `per_tenant`'s for tenant
/// `i`, checked against the drive's placement (`mode`): an FDP placement identifier below the
/// handles, a stream identifier 1 to 65535 with no more tenants' streams than the drive keeps
/// open. Its fio jobs' own `dataplacement` options are resolved against the drive here too
/// (fio's `dp_init`), as is its trace's `place_by` (the k-th value FDP placement identifier k or
/// stream k + 1), and a tenant has a default placement or a workload that places its writes,
/// not both.
fn resolve_tenant_placement(
    ctx: &Ctx,
    key: &str,
    i: usize,
    own: Option<i64>,
    (mode, per_tenant): DrivePlacement,
    workload: &mut Workload,
) -> Result<Option<u16>, ConfigError> {
    if let Workload::Fio(jobs) = workload {
        for j in jobs.iter_mut() {
            j.resolve_placement(mode.fdp_handles(), mode.max_streams()).map_err(|e| ctx.err(format!("{key}: {e}")))?;
        }
    }
    let trace_places = match workload {
        Workload::Trace { spec, .. } if spec.place_by != TenantBy::None => {
            spec.place = Some(PlaceTarget::of(mode).ok_or_else(|| {
                ctx.err(format!(
                    "{key}.trace.place_by: the drive offers no data placement: add [device.fdp] or [device.streams]"
                ))
            })?);
            true
        }
        _ => false,
    };
    let value = match (own, per_tenant) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(format!(
                "{key}.placement: the drive's per_tenant already gives each tenant its placement: give one"
            )))
        }
        (Some(v), None) => v,
        (None, Some(f)) => f(i) as i64,
        (None, None) => return Ok(None),
    };
    let field = if own.is_some() { format!("{key}.placement") } else { format!("{key} (per_tenant)") };
    let v = match mode {
        PlacementMode::None => {
            return Err(ctx.err(format!(
                "{field}: the drive offers no data placement: add [device.fdp] or [device.streams]"
            )))
        }
        PlacementMode::Fdp { persistent } => {
            if !(0..persistent.len() as i64).contains(&value) {
                return Err(ctx.err(format!(
                    "{field}: placement identifier {value}: the drive's FDP has placement handles 0 to {} (device.fdp.handles)",
                    persistent.len() - 1
                )));
            }
            value as u16
        }
        PlacementMode::Streams { streams } => {
            if !(1..=0xffff).contains(&value) {
                return Err(ctx.err(format!("{field}: stream {value}: expected a stream identifier from 1 to 65535")));
            }
            if own.is_none() && value > *streams as i64 {
                return Err(ctx.err(format!(
                    "{field}: {} tenants need a stream each, the drive keeps {streams} open (device.streams.streams)",
                    i + 1
                )));
            }
            value as u16
        }
    };
    if trace_places {
        return Err(ctx.err(format!(
            "{field}: its trace places its own writes (place_by): give the tenant a placement or its trace one, not both"
        )));
    }
    if let Some(j) = workload.jobs().iter().find(|j| j.data_placement.is_some()) {
        return Err(ctx.err(format!(
            "{field}: job '{}' places its own writes (dataplacement): give the tenant a placement or its jobs one, not both",
            j.name
        )));
    }
    Ok(Some(v))
}

/// A tenant's region: `"auto"` (the default: tenant `i` of `n`'s share), `"whole"`, or an
/// offset and a size (bytes or percentages of the drive), whole sectors within the drive.
fn resolve_region(
    ctx: &Ctx,
    key: &str,
    region: Option<&RegionValue>,
    (i, n): (u64, u64),
    capacity: u64,
) -> Result<(u64, u64), ConfigError> {
    match region {
        None => Ok(auto_region(i, n, capacity)),
        Some(RegionValue::Named(s)) if s == "auto" => Ok(auto_region(i, n, capacity)),
        Some(RegionValue::Named(s)) if s == "whole" => Ok((0, capacity)),
        Some(RegionValue::Named(s)) => Err(ctx.err(format!(
            "{key}.region: unknown region '{s}': expected \"auto\", \"whole\" or {{ offset = \"...\", size = \"...\" }}"
        ))),
        Some(RegionValue::Range { offset, size }) => {
            let off = size_or_percent(ctx, &format!("{key}.region.offset"), offset, capacity)?;
            let len = size_or_percent(ctx, &format!("{key}.region.size"), size, capacity)?;
            if len == 0 || off % 512 != 0 || len % 512 != 0 {
                return Err(ctx.err(format!(
                    "{key}.region: offset and size must be multiples of 512 bytes and the size non-zero"
                )));
            }
            if off.checked_add(len).is_none_or(|end| end > capacity) {
                return Err(ctx.err(format!(
                    "{key}.region: {off}+{len} bytes exceeds the device's capacity of {capacity} bytes"
                )));
            }
            Ok((off, len))
        }
    }
}

/// What the tenant runs: a trace, fio jobs (inline, a job file or a personality), or nothing
/// (an NBD export, whose one job issues what the export's clients send).
fn resolve_workload(
    ctx: &Ctx,
    key: &str,
    name: &str,
    t: &TenantSection,
    base: &Path,
    ext4: bool,
    collected: &mut Collected,
) -> Result<Workload, ConfigError> {
    if let Some(w) = resolve_filebench(ctx, key, t, base, ext4)? {
        return Ok(w);
    }
    let fio_given = t.fio.is_some() || t.job_file.is_some() || t.personality.is_some();
    if let Some(v) = &t.trace {
        if fio_given {
            return Err(ctx.err(format!("{key}: give only one of fio, job_file, personality and trace")));
        }
        let spec = crate::config::trace::resolve_trace(v, &format!("{key}.trace"), base, &|m| ctx.err(m), &|k, v| ctx.duration(k, v))?;
        let job = FioJob {
            name: name.to_string(),
            file: spec.paths[0].display().to_string(),
            iodepth: spec.depth(),
            job_options: spec.job_options(),
            ..FioJob::default()
        };
        return Ok(Workload::Trace { spec, job });
    }
    if !fio_given {
        let job = FioJob {
            name: name.to_string(),
            iodepth: EXPORT_DEPTH,
            job_options: vec![("ioengine".into(), "nbd".into())],
            ..FioJob::default()
        };
        return Ok(Workload::Export { job });
    }
    let jf = tenant_workload(ctx, key, name, t, base)?;
    if jf.jobs.is_empty() {
        return Err(ctx.err(format!("{key}: the fio job has no job sections")));
    }
    collect_diagnostics(&jf, collected);
    // fio trims a regular file by punching holes in it (`fallocate`), which the filesystem
    // model does not do; a buffered job's trims would otherwise reach the raw device under it.
    if let Some(j) = jf.jobs.iter().find(|j| ext4 && !j.direct && j.engine.is_none() && j.rw.does(crate::workload::fio::Dir::Trim)) {
        return Err(ctx.err(format!(
            "{key}: job '{}' ({}:{}) trims (rw={}) a file on the filesystem, which fio does by punching holes: not modelled; give it direct=1 to trim the device under the filesystem",
            j.name,
            j.file,
            j.line,
            j.rw.fio_name()
        )));
    }
    // fio's file and directory operation engines make, stat and delete files of a filesystem.
    if let Some(j) = jf.jobs.iter().find(|j| j.engine.is_some() && !ext4) {
        return Err(ctx.err(format!(
            "{key}: job '{}' ({}:{}) has ioengine={}, which makes, stats or deletes files of a filesystem: add [kernel] with filesystem = \"ext4\"",
            j.name,
            j.file,
            j.line,
            j.engine.expect("checked").fio_name()
        )));
    }
    // Several files per job are files of a filesystem.
    if let Some(j) = jf.jobs.iter().find(|j| j.nrfiles > 1 && !ext4) {
        return Err(ctx.err(format!(
            "{key}: job '{}' ({}:{}) has nrfiles={}, which needs a filesystem: add [kernel] with filesystem = \"ext4\"",
            j.name, j.file, j.line, j.nrfiles
        )));
    }
    if let Some(j) = jf.jobs.iter().find(|j| j.nrfiles > 1 && j.all_options().any(|(k, _)| k == "filename")) {
        return Err(ctx.err(format!(
            "{key}: job '{}' ({}:{}) names its file (filename) and asks for nrfiles={}: several named files are not modelled; drop filename to let fio name them",
            j.name, j.file, j.line, j.nrfiles
        )));
    }
    Ok(Workload::Fio(jf.jobs))
}

/// The personalities that are Filebench's: on a filesystem they run as Filebench runs them.
const FILEBENCH_PERSONALITIES: &[&str] = &["fileserver", "varmail", "webproxy"];

/// A Filebench workload: `filebench = "file.f" | "<bundled name>"`, or a Filebench personality
/// on a filesystem; `None` if the tenant has neither.
fn resolve_filebench(
    ctx: &Ctx,
    key: &str,
    t: &TenantSection,
    base: &Path,
    ext4: bool,
) -> Result<Option<Workload>, ConfigError> {
    use crate::workload::filebench;
    let personality = t.personality.as_deref().filter(|p| ext4 && FILEBENCH_PERSONALITIES.contains(p));
    let (text, source, what) = match (&t.filebench, personality) {
        (Some(f), _) => {
            if t.fio.is_some() || t.job_file.is_some() || t.personality.is_some() || t.trace.is_some() {
                return Err(ctx.err(format!("{key}: give only one of fio, job_file, personality, trace and filebench")));
            }
            if !ext4 {
                return Err(ctx.err(format!(
                    "{key}.filebench: a Filebench workload runs on a filesystem: add [kernel] with filesystem = \"ext4\""
                )));
            }
            if f.ends_with(".f") || f.contains('/') {
                let full = base.join(f);
                let text = crate::fsutil::read_text(&full, crate::fsutil::MAX_INPUT_FILE_BYTES, "Filebench workload file")
                    .map_err(|e| ctx.err(format!("{key}.filebench: cannot read '{}': {e}", full.display())))?;
                (text, full.display().to_string(), "filebench")
            } else {
                let Some(text) = filebench::personality(f) else {
                    let names: Vec<&str> = filebench::personality_names().collect();
                    return Err(ctx.err(format!(
                        "{key}.filebench: unknown workload '{f}': expected a file ending in .f or one of {}",
                        names.join(", ")
                    )));
                };
                (text.to_string(), format!("<personality {f}>"), "filebench")
            }
        }
        (None, Some(p)) => (filebench::personality(p).expect("bundled").to_string(), format!("<personality {p}>"), "personality"),
        (None, None) => {
            if t.filebench_set.is_some() {
                return Err(ctx.err(format!("{key}.filebench_set: needs a Filebench workload (filebench = \"...\")")));
            }
            return Ok(None);
        }
    };
    let mut text = text;
    let mut parsed = filebench::parse_wml(&text, &source).map_err(|e| ctx.err(format!("{key}.{what}: {e}")))?;
    if let Some(set) = &t.filebench_set {
        for (name, v) in set {
            if !parsed.workload.variables.contains_key(name) {
                return Err(ctx.err(format!("{key}.filebench_set.{name}: the workload has no variable ${name}")));
            }
            let value = match v {
                toml::Value::Integer(i) if *i >= 0 => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::String(s) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c)) => s.clone(),
                _ => {
                    return Err(ctx.err(format!(
                        "{key}.filebench_set.{name}: expected a non-negative integer, true/false, or a word such as \"16k\""
                    )))
                }
            };
            text.push_str(&format!("\nset ${name}={value}\n"));
        }
        // Read again: the values set resolve every reference to them, wherever it is.
        parsed = filebench::parse_wml(&text, &source).map_err(|e| ctx.err(format!("{key}.{what}: {e}")))?;
    }
    let spec = crate::config::FilebenchSpec { source, workload: parsed.workload };
    crate::workload::filebench::run::Runner::check(&spec.workload)
        .map_err(|e| ctx.err(format!("{key}.{what}: {}: {e}", spec.source)))?;
    let jobs = spec.jobs();
    Ok(Some(Workload::Filebench { spec: Box::new(spec), jobs }))
}

/// A tenant's jobs: from exactly one of `fio`, `job_file` and `personality`.
pub(super) fn tenant_workload(ctx: &Ctx, key: &str, name: &str, t: &TenantSection, base: &Path) -> Result<JobFile, ConfigError> {
    match (&t.fio, &t.job_file, &t.personality) {
        (Some(text), None, None) => {
            let label = format!("{}[tenant {name}].fio", ctx.file);
            Ok(parse_job_text(text, &label, &|v| std::env::var(v).ok())?)
        }
        (None, Some(path), None) => {
            let full = base.join(path);
            let shown = if full == Path::new(path) { format!("'{path}'") } else { format!("'{path}' ({})", full.display()) };
            let text = read_job_file(&full).map_err(|e| ctx.err(format!("{key}.job_file: cannot read job file {shown}: {e}")))?;
            Ok(parse_job_text(&text, &full.display().to_string(), &|v| std::env::var(v).ok())?)
        }
        (None, None, Some(p)) => match personality::get(p) {
            Some(p) => Ok(p.parse()?),
            None => Err(ctx.err(format!(
                "{key}.personality: unknown personality '{p}': expected one of {} (flashmux personalities)",
                personality::names()
            ))),
        },
        (None, None, None) => Err(ctx.err(format!(
            "{key}: no workload: give fio = \"...\", job_file = \"...\", personality = \"...\" or trace = \"...\""
        ))),
        _ => Err(ctx.err(format!("{key}: give only one of fio, job_file and personality"))),
    }
}

pub(super) fn resolve_weight(ctx: &Ctx, key: &str, v: Option<&toml::Value>) -> Result<u32, ConfigError> {
    let Some(v) = v else { return Ok(DEFAULT_WEIGHT) };
    match v.as_integer() {
        Some(w) if (1..=MAX_WEIGHT as i64).contains(&w) => Ok(w as u32),
        _ => Err(ctx.err(crate::config::invalid_weight(key, v))),
    }
}

/// The i-th of n equal slices of the device, aligned to 1 MiB where the device is large enough;
/// a lone tenant gets the whole device.
pub(super) fn auto_region(i: u64, n: u64, capacity: u64) -> (u64, u64) {
    if n == 1 {
        return (0, capacity);
    }
    let align = if capacity / n >= 64 * AUTO_REGION_ALIGN { AUTO_REGION_ALIGN } else { 4096 };
    let slice = capacity / n / align * align;
    (i * slice, slice)
}

pub(super) fn size_or_percent(ctx: &Ctx, key: &str, v: &str, capacity: u64) -> Result<u64, ConfigError> {
    match v.trim().strip_suffix('%') {
        Some(p) => {
            let pct: f64 = p.trim().parse().map_err(|_| ctx.err(format!("{key}: invalid percentage '{v}'")))?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(ctx.err(format!("{key}: {pct}% is out of range 0-100%")));
            }
            // Down to a whole 4 KiB, so percentages give aligned regions.
            Ok((capacity as f64 * pct / 100.0) as u64 / 4096 * 4096)
        }
        None => ctx.size(key, v),
    }
}

pub(super) fn check_overlaps(ctx: &Ctx, ts: &[TenantSpec], capacity: u64) -> Result<(), ConfigError> {
    for (i, a) in ts.iter().enumerate() {
        for b in &ts[i + 1..] {
            let whole = |t: &TenantSpec| t.region == (0, capacity);
            if whole(a) || whole(b) {
                continue; // "whole" is an explicit choice to share the device
            }
            if a.region.0 < b.region.0 + b.region.1 && b.region.0 < a.region.0 + a.region.1 {
                return Err(ctx.err(format!(
                    "tenants '{}' and '{}' have overlapping regions ({}+{} and {}+{} bytes); partitions must be disjoint (use region = \"whole\" to share the device)",
                    a.name, b.name, a.region.0, a.region.1, b.region.0, b.region.1
                )));
            }
        }
    }
    Ok(())
}
