//! The timeline as CSV: one row per tenant per interval, for plotting.

use crate::metrics::{RunResults, TimelineRow};
use std::io;

const HEADER: [&str; 21] = [
    "time_s",
    "interval_s",
    "tenant",
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "lat_mean_us",
    "lat_p99_us",
    "gc_pages_moved",
    "map_lookups",
    "map_misses",
    "cmt_pages",
    "slice_scale",
    "share",
    "share_ideal",
    "share_error",
    "gc_share",
    "gc_share_est",
    "zone_resets",
    "zone_errors",
];

/// Writes [`RunResults::timeline`] as CSV with a header row. Floats have six decimal places
/// (fixed, so the file is reproducible and diffs cleanly); an undefined value (e.g. the latency
/// of an interval without completions, if the row carries it as NaN) is an empty field.
pub fn write_timeline_csv<W: io::Write>(r: &RunResults, w: W) -> io::Result<()> {
    let mut out = TimelineCsv::new(w)?;
    for row in &r.timeline {
        out.row(row)?;
    }
    out.finish().map(|_| ())
}

/// The timeline's CSV written a row at a time, as a run streams it (see [`write_timeline_csv`]
/// for the format).
pub struct TimelineCsv<W: io::Write> {
    out: csv::Writer<W>,
}

impl<W: io::Write> TimelineCsv<W> {
    /// Starts the file: the header row.
    pub fn new(w: W) -> io::Result<TimelineCsv<W>> {
        let mut out = csv::Writer::from_writer(w);
        out.write_record(HEADER)?;
        Ok(TimelineCsv { out })
    }

    pub fn row(&mut self, row: &TimelineRow) -> io::Result<()> {
        self.out.write_record([
            num(row.time_s),
            num(row.interval_s),
            row.tenant.clone(),
            num(row.read_iops),
            num(row.write_iops),
            num(row.read_mbps),
            num(row.write_mbps),
            num(row.lat_mean_us),
            num(row.lat_p99_us),
            row.gc_units_moved.to_string(),
            row.map_lookups.to_string(),
            row.map_misses.to_string(),
            row.cmt_pages.to_string(),
            num(row.slice_scale),
            num(row.share),
            num(row.share_ideal),
            num(row.share_error),
            num(row.gc_share),
            num(row.gc_share_est),
            row.zone_resets.to_string(),
            row.zone_errors.to_string(),
        ])?;
        Ok(())
    }

    /// Flushes what is buffered and gives the writer back.
    pub fn finish(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| io::Error::new(e.error().kind(), e.error().to_string()))
    }
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_fixture::run;

    #[test]
    fn header_and_rows() {
        let mut buf = Vec::new();
        let mut r = run();
        r.timeline[0].tenant = "vm,0".into();
        assert!(write_timeline_csv(&r, &mut buf).is_ok());
        let text = String::from_utf8(buf).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "time_s,interval_s,tenant,read_iops,write_iops,read_mbps,write_mbps,lat_mean_us,lat_p99_us,gc_pages_moved,map_lookups,map_misses,cmt_pages,slice_scale,share,share_ideal,share_error,gc_share,gc_share_est,zone_resets,zone_errors"
        );
        assert_eq!(
            lines[1],
            "0.000000,1.000000,\"vm,0\",750.000000,0.000000,3.072000,0.000000,35.250000,0.333333,12,0,0,0,1.000000,1.000000,1.000000,0.000000,1.000000,,0,0"
        );
        // vm1's period does not overlap the interval: no share.
        assert_eq!(lines[2], "0.000000,1.000000,vm1,0.000000,100.000000,0.000000,0.409600,,6000.000000,0,0,0,0,0.500000,,,,0.000000,,0,0");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn empty_timeline_is_just_the_header() {
        let mut r = run();
        r.timeline.clear();
        let mut buf = Vec::new();
        assert!(write_timeline_csv(&r, &mut buf).is_ok());
        assert_eq!(buf, format!("{}\n", HEADER.join(",")).into_bytes());
    }

    #[test]
    fn write_errors_propagate() {
        struct Broken;
        impl io::Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let err = write_timeline_csv(&run(), Broken).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("disk full"));
    }
}
