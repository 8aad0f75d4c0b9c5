//! `flashmux serve --record FILE`: the request stream the model served, written as a trace
//! that flashmux replays (`flashmux replay`, a trace tenant) and that fio, MQSim or blkparse's
//! readers take. `flashmux run --record FILE` writes, through the same writer, the commands
//! the host block layer sends to the device (a [`crate::sim::DispatchSink`]).
//!
//! # Model
//! The model thread hands each request it accepts to a writer thread over a bounded channel,
//! as a [`TraceRecord`]: the time the model took it (nanoseconds since the server started:
//! the arrival, or the model's present if that is later, so times never go back), its
//! operation, offset and length, and its export as the stream. The writer formats records as
//! they come ([`write_trace`]), so a server that runs for days keeps only the channel's
//! records in memory; when the writer falls behind, the channel fills and the model waits for
//! it (back-pressure, nothing dropped). When the server stops, the channel closes, the writer
//! ends the file (fio's `close` lines) and reports how many requests it wrote.
//!
//! # Worked example
//! Two exports, `vm1` and `vm2`; `vm1` reads 4 KiB at 0 when the server is 1.5 ms old, then
//! `vm2` writes 8 KiB at 64 KiB at 2.25 ms. In fio's iolog (microseconds):
//! `fio version 3 iolog`, `1500 vm1 add`, `1500 vm1 open`, `1500 vm1 read 0 4096`,
//! `2250 vm2 add`, `2250 vm2 open`, `2250 vm2 write 65536 8192`, then `2250 vm1 close` and
//! `2250 vm2 close`.
//!
//! # Parameters
//! The file and its format (`fio-iolog`, `mqsim`, `blkparse`: [`Format::WRITABLE`]);
//! [`CHANNEL_RECORDS`] records in flight between the threads.
//!
//! Source: the formats as `flashmux trace convert` writes them (`workload/trace/writer.rs`).

use crate::device::IoOp;
use crate::workload::trace::{write_trace, Format, TraceOp, TraceRecord};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::{self, JoinHandle};

/// Records the channel holds before the model waits for the writer.
pub const CHANNEL_RECORDS: usize = 65_536;

/// The model thread's end: hands requests to the writer.
pub struct RecordSink(SyncSender<TraceRecord>);

impl RecordSink {
    /// Records a request the model accepted at `time_ns` (since the server started) for
    /// `export`. Blocks while the writer is behind by [`CHANNEL_RECORDS`]. Zone management
    /// commands are not recorded: the trace formats have no zone commands.
    pub fn record(&self, time_ns: u64, export: usize, op: IoOp, offset: u64, len: u64) {
        let Some(op) = TraceOp::of(op) else { return };
        let stream = u32::try_from(export).unwrap_or(u32::MAX);
        // The writer ends only when every sink is gone, or on a write error it reports then.
        let _ = self.0.send(TraceRecord { time_ns, op, offset, len, stream, place: 0 });
    }
}

/// `flashmux run --record`: the commands the block layer sends, at their simulated time, each
/// tenant a stream.
impl crate::sim::DispatchSink for RecordSink {
    fn dispatched(&mut self, at: crate::units::SimTime, tenant: crate::units::TenantId, op: IoOp, offset: u64, len: u64) {
        self.record(at.0, tenant.index(), op, offset, len);
    }
}

/// The writer thread, until the server stops.
pub struct Recorder {
    path: PathBuf,
    thread: JoinHandle<io::Result<u64>>,
}

impl Recorder {
    /// Creates `path` and starts the writer; `names` are the exports' names (the streams').
    pub fn start(path: &Path, format: Format, names: Vec<String>) -> io::Result<(Recorder, RecordSink)> {
        if !Format::WRITABLE.contains(&format) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("cannot write {} traces", format.name())));
        }
        let file = File::create(path)?;
        let (tx, rx) = sync_channel(CHANNEL_RECORDS);
        let thread = thread::Builder::new().name("flashmux-record".into()).spawn(move || {
            let mut out = BufWriter::new(file);
            let name = |s: u32| names.get(s as usize).cloned().unwrap_or_else(|| format!("export{s}"));
            let n = write_trace(rx.into_iter(), format, &mut out, &name)?;
            out.flush()?;
            Ok(n)
        })?;
        Ok((Recorder { path: path.to_path_buf(), thread }, RecordSink(tx)))
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the writer to end the file, once every [`RecordSink`] is gone; the number of
    /// requests written.
    pub fn finish(self) -> io::Result<u64> {
        match self.thread.join() {
            Ok(r) => r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display()))),
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_example_is_written_as_fio_reads_it() {
        let dir = std::env::temp_dir().join(format!("flashmux-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rec.iolog");
        let (rec, sink) = Recorder::start(&path, Format::FioIolog, vec!["vm1".into(), "vm2".into()]).unwrap();
        sink.record(1_500_000, 0, IoOp::Read, 0, 4096);
        sink.record(2_250_000, 1, IoOp::Write, 65536, 8192);
        drop(sink);
        assert_eq!(rec.finish().unwrap(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "fio version 3 iolog\n1500 vm1 add\n1500 vm1 open\n1500 vm1 read 0 4096\n2250 vm2 add\n2250 vm2 open\n\
             2250 vm2 write 65536 8192\n2250 vm1 close\n2250 vm2 close\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_writable_formats_are_taken() {
        let path = std::env::temp_dir().join(format!("flashmux-record-msr-{}", std::process::id()));
        let e = Recorder::start(&path, Format::Msr, vec![]).err().expect("MSR is read-only");
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(!path.exists(), "nothing created");
    }
}
