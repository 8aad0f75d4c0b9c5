//! A trace-based MQSim flow as a trace tenant (`host/IO_Flow_Trace_Based.cpp` is what it
//! reproduces): MQSim's ASCII trace (`time device sector sectors type`, times in ns), replayed
//! open loop from its own directory-resolved path, addresses beyond the flow's range wrapped into
//! it, and only as many requests as `Percentage_To_Be_Executed` asks.

use super::emit::{quoted, Toml};
use super::workload::{Flow, FlowCtx};
use crate::import::ImportError;
use std::io::BufRead;

/// Writes the trace of `flow` in section `s`.
pub(super) fn emit(t: &mut Toml, s: &str, flow: &Flow, ctx: &FlowCtx) -> Result<(), ImportError> {
    let p = &flow.p;
    let path = p.string("File_Path")?;
    let full = ctx.trace_path(&path.v);
    let full = std::fs::canonicalize(&full).unwrap_or(full);
    let file = std::fs::File::open(&full).map_err(|e| {
        path.loc.err(format!(
            "cannot read the trace '{}' ({}): {e} (a relative path is taken from the workload file's directory; MQSim takes it from its working directory)",
            path.v,
            full.display()
        ))
    })?;
    let (lines, records) = count(std::io::BufReader::new(file))
        .map_err(|e| path.loc.err(format!("cannot read {}: {e}", full.display())))?;
    let relay = p.int("Relay_Count", None)?;
    if relay.v < 1 {
        return Err(relay.loc.err(format!("{}: expected at least 1 replay (MQSim would issue nothing)", relay.v)));
    }
    if relay.v > 1 {
        return Err(relay.loc.err(format!(
            "{}: flashmux replays a trace once; MQSim's {} replays, each starting when the last request of the one before is issued, would be {} times the requests: give 1, or concatenate the trace with shifted times",
            relay.v, relay.v, relay.v
        )));
    }
    let pct = p.int("Percentage_To_Be_Executed", None)?;
    if pct.v < 1 {
        return Err(pct.loc.err(format!("{}%: expected 1 to 100 (MQSim would issue nothing)", pct.v)));
    }
    // IO_Flow_Trace_Based.cpp: the requests counted up to the first malformed line, times the
    // percentage (MQSim takes more than 100 as 100).
    let wanted = (pct.v.min(100) as f64 / 100.0 * records as f64) as u64;
    if p.is_given("Time_Unit") {
        let unit = p.choice("Time_Unit", None, &["PICOSECOND", "NANOSECOND", "MICROSECOND"])?;
        if unit.v != "NANOSECOND" {
            let why = format!("{}: MQSim reads this but never uses it: its trace times are nanoseconds, and so are flashmux's for this format", unit.v);
            t.approx_note(s, &unit.loc, &why);
        }
    }
    t.note(s, "replayed at its own times (ns), addresses beyond the flow's range wrapped into it, as MQSim does");
    let mut table = format!(
        "{{ path = {}, format = \"mqsim\", max_outstanding = {}",
        quoted(&full.display().to_string()),
        ctx.queue_depth.min(65_536)
    );
    if wanted < lines {
        table.push_str(&format!(", max_requests = {}", wanted.max(1)));
    }
    table.push_str(" }");
    t.set(s, "trace", table);
    Ok(())
}

/// The trace's non-empty lines, and its records as MQSim counts them: lines of exactly five
/// space-separated fields, up to the first that is not.
fn count(r: impl BufRead) -> std::io::Result<(u64, u64)> {
    let (mut lines, mut records, mut counting) = (0u64, 0u64, true);
    for line in r.lines() {
        let line = line?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.trim().is_empty() {
            counting = false;
            continue;
        }
        lines += 1;
        let fields = line.split(' ').count() - usize::from(line.ends_with(' '));
        counting &= fields == 5;
        records += u64::from(counting);
    }
    Ok((lines, records))
}

#[cfg(test)]
mod tests {
    #[test]
    fn records_are_counted_up_to_the_first_malformed_line() {
        let text = "1 0 8 8 0\r\n2 0 16 8 1\n3 0 24 8\n4 0 32 8 0\n";
        assert_eq!(super::count(text.as_bytes()).unwrap(), (4, 2));
    }
}
