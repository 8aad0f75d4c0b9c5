//! Files the user names: read with a bound, written so that a failure never leaves half a file.
//!
//! - [`read_text`] reads a small input file (a scenario, an experiment, an fio job file or one it
//!   includes) whole: only a regular file, and at most a given size. A named pipe would block the
//!   read until something writes to it, and `/dev/zero` would fill memory; both are refused before
//!   anything is read.
//! - [`write_atomic`] writes an output through a temporary file in the same directory and renames
//!   it over the target when it is complete: a reader sees the old file or the new one, never a
//!   part, and an error (or a crash) leaves the old file as it was.
//! - [`same_file`] tells whether two paths are one file (device and inode), whatever names,
//!   symbolic or hard links lead to it: an output must never be one of the inputs it is made from.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// The largest scenario, experiment or fio job file read: far beyond any real one (the bundled
/// experiments are a few KiB), small enough that a wrong file is refused before it is read.
pub const MAX_INPUT_FILE_BYTES: u64 = 16 << 20;

/// Why a file could not be read.
///
/// Its message is complete on its own (the I/O error's text included), so it has no `source`:
/// an error chain printed in full would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading failed.
    #[error("{0}")]
    Io(io::Error),
    /// The path is something other than a regular file.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// The file is larger than the bound.
    #[error("it is {bytes} bytes; a {what} may have at most {} ({max} bytes)", crate::units::fmt_bytes(*.max))]
    TooLarge {
        bytes: u64,
        max: u64,
        /// What kind of file was read ("scenario file", "fio job file", ...).
        what: &'static str,
    },
}

/// What kind of file system object `m` describes, for a message.
pub fn kind_of(m: &fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Checks that `path` (followed through symbolic links) is a regular file, without opening it
/// (opening a named pipe blocks until a writer comes).
pub fn require_regular(path: &Path) -> Result<fs::Metadata, ReadError> {
    let m = fs::metadata(path).map_err(ReadError::Io)?;
    if m.is_file() {
        Ok(m)
    } else {
        Err(ReadError::NotRegular(kind_of(&m)))
    }
}

/// Reads a whole text file of at most `max` bytes; `what` names the kind of file in the message
/// when it is larger.
pub fn read_text(path: &Path, max: u64, what: &'static str) -> Result<String, ReadError> {
    let m = require_regular(path)?;
    if m.len() > max {
        return Err(ReadError::TooLarge { bytes: m.len(), max, what });
    }
    let file = File::open(path).map_err(ReadError::Io)?;
    // The path may have been replaced between the check and the open.
    let m = file.metadata().map_err(ReadError::Io)?;
    if !m.is_file() {
        return Err(ReadError::NotRegular(kind_of(&m)));
    }
    // A file that grows while it is read is still read only up to the bound.
    let mut bytes = Vec::with_capacity(m.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge { bytes: bytes.len() as u64, max, what });
    }
    String::from_utf8(bytes)
        .map_err(|e| ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))))
}

/// Whether `a` and `b` are the same file: the same device and inode, however they are named
/// (symbolic links are followed, hard links are the same inode). False when either does not
/// exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
}

/// Writes `path` with `write`: into a temporary file next to it, flushed to disk, then renamed
/// over `path`. On an error from `write` or from the file system the temporary file is removed
/// and `path` is left as it was.
///
/// A symbolic link is written through (the file it points to is replaced, the link stays); an
/// existing file's permissions are kept. A path that exists and is not a regular file (a device
/// such as `/dev/null`, a named pipe) cannot be replaced: it is written directly, as a stream.
pub fn write_atomic<T, E: From<io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<T, E>,
) -> Result<T, E> {
    let target = resolve_link(path);
    let existing = fs::metadata(&target).ok();
    if let Some(m) = &existing {
        if !m.is_file() {
            let mut out = BufWriter::new(OpenOptions::new().write(true).open(&target)?);
            let v = write(&mut out)?;
            out.flush()?;
            return Ok(v);
        }
    }
    let (temp_path, file) = create_temp(&target)?;
    let cleanup = |e: E| {
        let _ = fs::remove_file(&temp_path);
        e
    };
    let mut out = BufWriter::new(file);
    let v = write(&mut out).map_err(cleanup)?;
    let finish = || -> io::Result<()> {
        let file = out.into_inner().map_err(|e| e.into_error())?;
        if let Some(m) = &existing {
            file.set_permissions(m.permissions())?;
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&temp_path, &target)
    };
    finish().map_err(|e| cleanup(E::from(e)))?;
    Ok(v)
}

/// The file a symbolic link leads to (the path itself when it is not a link, or when the link
/// is dangling: then the path is replaced like a missing file).
fn resolve_link(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// A new, empty temporary file in `target`'s directory (so the rename stays on one file system),
/// named after it: `.<name>.<pid>.<n>.tmp`.
fn create_temp(target: &Path) -> io::Result<(PathBuf, File)> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target.file_name().map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let mut n = 0u32;
    loop {
        let p = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("flashmux-fsutil-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn read_text_takes_regular_files_up_to_the_bound() {
        let d = scratch("read");
        let p = d.join("a.toml");
        fs::write(&p, "name = \"x\"\n").unwrap();
        assert_eq!(read_text(&p, 100, "scenario file").unwrap(), "name = \"x\"\n");
        let e = read_text(&p, 4, "scenario file").unwrap_err().to_string();
        assert_eq!(e, "it is 11 bytes; a scenario file may have at most 4 B (4 bytes)");
        let e = read_text(&d, 100, "scenario file").unwrap_err().to_string();
        assert_eq!(e, "it is a directory, not a regular file");
        let e = read_text(&d.join("none"), 100, "scenario file").unwrap_err().to_string();
        assert!(e.contains("No such file or directory"), "{e}");
        fs::write(&p, [b'a', 0xff, b'b']).unwrap();
        let e = read_text(&p, 100, "scenario file").unwrap_err().to_string();
        assert_eq!(e, "not UTF-8 text (byte 1)");
        fs::remove_dir_all(d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn read_text_refuses_pipes_and_devices_without_blocking() {
        let d = scratch("fifo");
        let fifo = d.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening the pipe for reading would block this test for ever.
        let e = read_text(&fifo, MAX_INPUT_FILE_BYTES, "fio job file").unwrap_err().to_string();
        assert_eq!(e, "it is a named pipe (FIFO), not a regular file");
        let e = read_text(Path::new("/dev/zero"), MAX_INPUT_FILE_BYTES, "fio job file").unwrap_err().to_string();
        assert_eq!(e, "it is a character device, not a regular file");
        fs::remove_dir_all(d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn same_file_sees_through_names_symlinks_and_hard_links() {
        let d = scratch("same");
        let a = d.join("a");
        fs::write(&a, "x").unwrap();
        let b = d.join("b");
        fs::write(&b, "x").unwrap();
        std::os::unix::fs::symlink(&a, d.join("link")).unwrap();
        fs::hard_link(&a, d.join("hard")).unwrap();
        assert!(same_file(&a, &a));
        assert!(same_file(&a, &d.join(".").join("a")));
        assert!(same_file(&a, &d.join("link")));
        assert!(same_file(&d.join("hard"), &a));
        assert!(!same_file(&a, &b), "same content, different files");
        assert!(!same_file(&a, &d.join("missing")));
        fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn write_atomic_replaces_the_file_only_when_complete() {
        let d = scratch("write");
        let p = d.join("out.txt");
        fs::write(&p, "old\n").unwrap();
        let n = write_atomic(&p, |w| -> io::Result<u32> {
            w.write_all(b"new\n")?;
            Ok(7)
        })
        .unwrap();
        assert_eq!((n, fs::read_to_string(&p).unwrap().as_str()), (7, "new\n"));
        // A failure half way: the old content stays, no temporary file is left.
        let r = write_atomic(&p, |w| -> io::Result<()> {
            w.write_all(b"half of it")?;
            Err(io::Error::other("the input broke"))
        });
        assert_eq!(r.unwrap_err().to_string(), "the input broke");
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(&d), vec!["out.txt"]);
        // A new file.
        write_atomic(&d.join("fresh"), |w| w.write_all(b"x")).unwrap();
        assert_eq!(fs::read_to_string(d.join("fresh")).unwrap(), "x");
        fs::remove_dir_all(d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn write_atomic_keeps_links_permissions_and_writes_devices_directly() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let d = scratch("links");
        let real = d.join("real");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, |w| w.write_all(b"new")).unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o640);
        // A device is written as a stream, not replaced.
        write_atomic(Path::new("/dev/null"), |w| w.write_all(b"gone")).unwrap();
        assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        fs::remove_dir_all(d).unwrap();
    }
}
