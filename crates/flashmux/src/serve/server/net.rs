//! Sockets, outside any policy: a connected stream of either family (Unix or TCP), a stream whose
//! reads and writes share one deadline (the handshake's), the listener (binding, replacing a
//! stale Unix socket, words for a path that cannot be used), and the two ways replies are sent:
//! `send_nowait` (`MSG_DONTWAIT`: what the socket takes now, on a socket the connection's thread
//! reads in blocking mode) and `send_blocking` (as long as the socket's send timeout allows).

use super::*;

/// A connected socket of either family.
pub(super) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub(super) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
    pub(super) fn shutdown(&self, how: Shutdown) {
        // Shutting down a socket the peer already closed fails harmlessly.
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
    pub(super) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
        }
    }
    pub(super) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(on),
            Stream::Tcp(s) => s.set_nonblocking(on),
        }
    }
    pub(super) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A stream whose reads and writes fail once `deadline` has passed: the whole handshake is
/// bounded, not each read (a client sending one byte at a time would otherwise never time out).
pub(super) struct Deadlined<'a> {
    pub(super) stream: &'a mut Stream,
    pub(super) deadline: Instant,
}

impl Deadlined<'_> {
    pub(super) fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    /// Listens at `at`; returns where it really listens (a TCP port 0 becomes the port given).
    pub(super) fn bind(at: &Listen) -> Result<(Listener, Listen), ServeError> {
        match at {
            Listen::Unix(path) => {
                let bad = |why: String| ServeError::BadInput(format!("--socket {}: {why}", path.display()));
                // A socket left by a server that is gone (nothing accepts on it) is replaced;
                // a live one, or anything that is not a socket, is left alone.
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    use std::os::unix::fs::FileTypeExt;
                    let t = meta.file_type();
                    if !t.is_socket() {
                        return Err(bad(format!(
                            "the path exists and is not a socket ({}): not removing it; expected a new path, or a socket left by a server that is gone",
                            file_kind(&t)
                        )));
                    }
                    if UnixStream::connect(path).is_ok() {
                        return Err(bad(
                            "a server is already listening on it: expected a path no server is using".into()
                        ));
                    }
                    std::fs::remove_file(path)
                        .map_err(|e| bad(format!("cannot remove the stale socket there: {e}")))?;
                }
                let l = UnixListener::bind(path).map_err(|e| bad(path_error(path, &e, "cannot listen there")))?;
                Ok((Listener::Unix(l), at.clone()))
            }
            Listen::Tcp(addr) => {
                let bad = |e: io::Error| ServeError::BadInput(format!("--listen {addr}: cannot listen there: {e}"));
                let l = TcpListener::bind(addr).map_err(bad)?;
                let actual = l.local_addr().map_err(bad)?;
                Ok((Listener::Tcp(l), Listen::Tcp(actual)))
            }
        }
    }

    pub(super) fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                // Replies are small and latency matters: no Nagle delay.
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
    }
}

/// What a file that is in the way is, for messages.
pub(super) fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Why a path given on the command line could not be opened or created, in words: a missing
/// directory is named, other errors are said as the system says them after `doing`.
pub(super) fn path_error(path: &std::path::Path, e: &io::Error, doing: &str) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => {
            match path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
                Some(d) => {
                    format!("the directory {} does not exist: expected a path in an existing directory", d.display())
                }
                None => format!("{doing}: {e}"),
            }
        }
        Some(libc::EROFS) => "it is on a read-only file system: expected a path this server may write".into(),
        Some(libc::EISDIR) => "it is a directory: expected a regular file (created if missing)".into(),
        Some(libc::EACCES | libc::EPERM) => format!("{doing} ({e}): expected a path this server may read and write"),
        _ => format!("{doing}: {e}"),
    }
}

/// `--backing`'s file could not be used: the store's own refusals (not a regular file, longer
/// than the drive, locked by another server) and the system's, in one message.
pub(super) fn backing_error(path: &std::path::Path, e: &io::Error) -> ServeError {
    let why = match e.kind() {
        // The store's own messages say what is wrong and what is allowed.
        io::ErrorKind::InvalidInput | io::ErrorKind::WouldBlock if e.raw_os_error().is_none() => e.to_string(),
        _ => path_error(path, e, "cannot open it for reading and writing"),
    };
    ServeError::BadInput(format!("--backing {}: {why}", path.display()))
}

impl Listen {
    /// Wakes a listener blocked in `accept` by connecting to it.
    pub(super) fn poke(&self) {
        let _ = match self {
            Listen::Unix(p) => UnixStream::connect(p).map(drop),
            Listen::Tcp(a) => TcpStream::connect(a).map(drop),
        };
    }
}

/// Writes what the socket takes of `data` now, without waiting (`MSG_DONTWAIT`, on this call
/// only: the connection's thread keeps reading the same socket in blocking mode). `Ok(0)`: the
/// socket is full.
pub(super) fn send_nowait(stream: &Stream, data: &[u8]) -> io::Result<usize> {
    loop {
        if data.is_empty() {
            return Ok(0);
        }
        // SAFETY: `data` is a live slice of `data.len()` bytes; the descriptor is open while
        // `stream` is.
        let n = unsafe {
            libc::send(stream.fd(), data.as_ptr().cast(), data.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(0),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// Writes some of `data`, waiting for the socket as long as its send timeout allows (then
/// `WouldBlock`): for a connection's writer thread.
pub(super) fn send_blocking(stream: &Stream, data: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: as in `send_nowait`.
        let n = unsafe { libc::send(stream.fd(), data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
        if n > 0 {
            return Ok(n as usize);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
