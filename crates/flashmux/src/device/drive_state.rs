//! Saved drives: a preconditioned drive written to a file (`flashmux age --save`) and loaded in
//! place of aging (`[precondition] state_file`), with byte-identical results.
//!
//! Aging is the expensive part of most runs (seconds for 64 GiB, minutes for 1 TiB) and a sweep
//! repeats it for every point that shares a drive. Preconditioning changes only the FTL (see
//! `device::precondition`: its tables, blocks and counters; its own random stream is drawn from
//! a label of its own), so the drive after aging is the FTL's state plus the aging's report. A
//! scenario that loads it builds its device as usual, then takes that state instead of aging:
//! every later event, draw and result is the same as if it had aged the drive itself.
//!
//! **Which drive fits which scenario**: the file records the scenario's [drive key]
//! (`Scenario::drive_key`): the flashmux version, the seed, the device's configuration, the
//! preconditioning (state and fill), the number of tenants and their regions, and for
//! `workload` aging their workloads. A scenario loads a file only if every part agrees; the
//! error names the parts that do not. What a scenario does after aging (its schedulers, run
//! time, stop conditions, VM path) is not part of the key: those points share one drive.
//!
//! **Format** (version 1): the magic `FLASHMUXDRIVE` padded to 16 bytes, the format version
//! (u32 LE), a JSON header (u64 LE length, then the key, the aging's report and a summary), the
//! FTL's state (`Ftl::write_state`), then the SHA-256 of everything before it. A file that is
//! not a drive state, of another format version, truncated, with extra bytes, altered (checksum)
//! or of another drive is refused with its path and what is wrong.
//!
//! Worked example: `flashmux age` on the default scenario (paper C's 8 GiB drive, full,
//! workload-aged: 257,356 GC runs) ages it in 0.42 s and writes 21.9 MB in 0.03 s; the run with
//! `state_file` then takes 0.06 s instead of 0.45 s, with the same three result files. A 64 GiB
//! `tlc-nvme` drive: 187 MB, aging 3.7 s, a whole run loading it 0.24 s (docs/PERFORMANCE.md).
//!
//! [drive key]: crate::config::Scenario::drive_key

use super::precondition::PreconditionReport;
use super::{Backend, Device};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// The file's first 16 bytes.
pub const MAGIC: &[u8; 16] = b"FLASHMUXDRIVE\0\0\0";
/// The format written and the only one read.
pub const FORMAT_VERSION: u32 = 1;
/// The header is small (the key, the report, a summary): a larger length is not a drive state.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// The JSON header.
#[derive(Serialize, Deserialize)]
struct Header {
    /// The drive key, part by part.
    key: Vec<(String, String)>,
    report: PreconditionReport,
    /// For people: the preset, capacity and preconditioning.
    summary: String,
}

/// Why a saved drive cannot be used; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DriveStateError {
    pub path: String,
    pub message: String,
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes what it reads.
struct HashingReader<R> {
    inner: R,
    hash: Sha256,
    bytes: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

impl Device {
    /// Writes the drive (its FTL's state), with `key` and the aging's `report`, to `path`
    /// whole or not at all. Returns the bytes written.
    pub fn save_state(
        &self,
        path: &Path,
        key: &[(&str, String)],
        report: &PreconditionReport,
        summary: &str,
    ) -> Result<u64, DriveStateError> {
        let err = |message: String| DriveStateError { path: path.display().to_string(), message };
        let Backend::Ssd(ssd) = self.backend() else {
            return Err(err("a null device has no drive to save".into()));
        };
        let header = Header {
            key: key.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            report: report.clone(),
            summary: summary.to_string(),
        };
        let json = serde_json::to_vec(&header).map_err(|e| err(e.to_string()))?;
        crate::fsutil::write_atomic(path, |w| -> io::Result<u64> {
            let mut h = Hashing { inner: BufWriter::with_capacity(1 << 20, w), hash: Sha256::new(), bytes: 0 };
            h.write_all(MAGIC)?;
            h.write_all(&FORMAT_VERSION.to_le_bytes())?;
            h.write_all(&(json.len() as u64).to_le_bytes())?;
            h.write_all(&json)?;
            ssd.ftl().write_state(&mut h)?;
            let digest = h.hash.finalize_reset();
            let mut inner = h.inner;
            inner.write_all(&digest)?;
            inner.flush()?;
            Ok(h.bytes + digest.len() as u64)
        })
        .map_err(|e: io::Error| err(format!("cannot write it: {e}")))
    }

    /// Loads a drive saved by [`Device::save_state`] into this freshly built device, if its key
    /// equals `key`; returns the aging's report, as aging in place would have.
    pub fn load_state(&mut self, path: &Path, key: &[(&str, String)]) -> Result<PreconditionReport, DriveStateError> {
        let shown = path.display().to_string();
        let err = |message: String| DriveStateError { path: shown.clone(), message };
        let Backend::Ssd(ssd) = self.backend_mut() else {
            return Err(err("a null device has no drive state to load: drop precondition.state_file".into()));
        };
        let file = File::open(path).map_err(|e| err(format!("cannot open it: {e}")))?;
        let meta = file.metadata().map_err(|e| err(format!("cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(err("not a regular file".into()));
        }
        let size = meta.len();
        let mut r = HashingReader { inner: BufReader::with_capacity(1 << 20, file), hash: Sha256::new(), bytes: 0 };
        let truncated = |r: &HashingReader<BufReader<File>>, e: io::Error| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                err(format!("truncated: it ends after {} of the bytes it needs ({size} bytes in the file)", r.bytes))
            } else {
                err(format!("cannot read it: {e}"))
            }
        };
        let mut magic = [0u8; 16];
        r.read_exact(&mut magic).map_err(|_| err("not a flashmux drive state (written by `flashmux age --save`)".into()))?;
        if &magic != MAGIC {
            return Err(err("not a flashmux drive state (written by `flashmux age --save`)".into()));
        }
        let mut v = [0u8; 4];
        r.read_exact(&mut v).map_err(|e| truncated(&r, e))?;
        let version = u32::from_le_bytes(v);
        if version != FORMAT_VERSION {
            return Err(err(format!(
                "drive state format {version}: this flashmux reads format {FORMAT_VERSION}: age the drive again with `flashmux age --save`"
            )));
        }
        let mut len = [0u8; 8];
        r.read_exact(&mut len).map_err(|e| truncated(&r, e))?;
        let len = u64::from_le_bytes(len);
        if len > MAX_HEADER_BYTES {
            return Err(err(format!("its header claims {len} bytes: damaged")));
        }
        let mut json = vec![0u8; len as usize];
        r.read_exact(&mut json).map_err(|e| truncated(&r, e))?;
        let header: Header = serde_json::from_slice(&json).map_err(|e| err(format!("its header does not parse ({e}): damaged")))?;
        let differs: Vec<String> = key
            .iter()
            .filter_map(|(k, want)| {
                let have = header.key.iter().find(|(hk, _)| hk == k).map(|(_, v)| v.as_str());
                (have != Some(want.as_str())).then(|| match (*k, have) {
                    ("device" | "regions" | "workloads", _) => format!("the {k} differ"),
                    (_, Some(h)) => format!("{k} {h} (this scenario: {want})"),
                    (_, None) => format!("{k} (not recorded)"),
                })
            })
            .collect();
        if !differs.is_empty() {
            return Err(err(format!(
                "saved from another drive or preconditioning ({}): {}; age this scenario's drive with `flashmux age --save`",
                header.summary,
                differs.join(", ")
            )));
        }
        ssd.ftl_mut().read_state(&mut r).map_err(|e| match e {
            crate::ftl::StateError::Io(e) => truncated(&r, e),
            crate::ftl::StateError::Invalid(m) => err(format!("{m}: damaged, or saved from another drive")),
        })?;
        let digest = r.hash.finalize_reset();
        let mut stored = [0u8; 32];
        r.inner.read_exact(&mut stored).map_err(|_| err("truncated: its checksum is missing".into()))?;
        if digest.as_slice() != stored {
            return Err(err("its checksum does not match its contents: the file was altered or damaged".into()));
        }
        let mut extra = [0u8; 1];
        if r.inner.read(&mut extra).map_err(|e| err(format!("cannot read it: {e}")))? != 0 {
            return Err(err(format!("{} bytes past its end: damaged", size - r.bytes - 32)));
        }
        // Counters start at zero for the run, as after aging in place.
        ssd.reset_map_stats();
        ssd.reset_placement_stats();
        Ok(header.report)
    }
}
