//! `flashmux serve` driven by real clients (nbdinfo, fio's nbd engine, qemu-img, qemu-io,
//! nbdfuse) and by a raw protocol client for what real clients never send.
//!
//! Each test starts its own server on a socket in its own directory and stops it with SIGTERM.
//! A test whose tool is missing says so and passes, unless `FLASHMUX_REQUIRE_TOOLS` is set (CI
//! installs the tools and sets it).

mod common;

use common::{flashmux, tmpdir, write};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A small drive (223 MiB) that preconditions in a moment.
const DRIVE: &str = r#"
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 256
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
"#;

/// Two exports of 64 MiB on [`DRIVE`].
fn scenario(dir: &Path, extra: &str) -> PathBuf {
    write(
        dir,
        "serve.toml",
        &format!(
            "{DRIVE}{extra}\n[[tenant]]\nname = \"vm1\"\nregion = {{ offset = \"0\", size = \"64MiB\" }}\n[[tenant]]\nname = \"vm2\"\nregion = {{ offset = \"64MiB\", size = \"64MiB\" }}\n"
        ),
    )
}

/// Whether `tool` can run here; if not, the test is skipped with a message (or fails in CI).
fn have(tool: &str) -> bool {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var_os("FLASHMUX_REQUIRE_TOOLS").is_none(), "{tool} is required (FLASHMUX_REQUIRE_TOOLS is set) but not installed");
        eprintln!("skipped: {tool} is not installed (apt-get install fio libnbd-bin qemu-utils fuse3)");
    }
    found
}

struct Server {
    child: Child,
    socket: PathBuf,
    out: PathBuf,
    log: mpsc::Receiver<String>,
    lines: Vec<String>,
}

impl Server {
    fn start(dir: &Path, scenario: &Path, args: &[&str]) -> Server {
        let socket = dir.join("fm.sock");
        let s = socket.to_str().unwrap().to_string();
        Server::start_at(dir, scenario, &[&["--socket", &s][..], args].concat(), socket)
    }

    /// A server listening where `args` say; `socket` is the Unix socket it should remove.
    fn start_at(dir: &Path, scenario: &Path, args: &[&str], socket: PathBuf) -> Server {
        let out = dir.join("out");
        let mut child = flashmux()
            .arg("serve")
            .arg(scenario)
            .arg("-o")
            .arg(&out)
            .args(["--output-format", "json"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server { child, socket, out, log, lines: Vec::new() };
        s.wait_for("serving ");
        s
    }

    /// Waits (up to a minute: the drive is preconditioned first) for a log line containing `needle`.
    fn wait_for(&mut self, needle: &str) -> String {
        loop {
            match self.log.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    self.lines.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no '{needle}' from the server; it said:\n{}", self.lines.join("\n")),
            }
        }
    }

    fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    /// SIGTERM, then the results it wrote and everything it logged.
    fn stop_keeping_log(&mut self) -> (serde_json::Value, Vec<String>) {
        let kill = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        let status = self.child.wait().unwrap();
        while let Ok(l) = self.log.recv_timeout(Duration::from_secs(5)) {
            self.lines.push(l);
        }
        assert_eq!(status.code(), Some(0), "server log:\n{}", self.lines.join("\n"));
        assert!(!self.socket.exists(), "the socket is removed");
        let r = serde_json::from_str(&std::fs::read_to_string(self.out.join("results.json")).unwrap()).unwrap();
        (r, self.lines.clone())
    }

    /// SIGTERM, then the results it wrote.
    fn stop(mut self) -> serde_json::Value {
        self.stop_keeping_log().0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{:?} failed:\n{}\n{}", cmd, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn nbdinfo_sees_each_export_with_its_size_and_flags() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tmpdir("serve-nbdinfo");
    let server = Server::start(&dir, &scenario(&dir, ""), &[]);
    let list = run_ok(Command::new("nbdinfo").arg("--list").arg(format!("nbd+unix://?socket={}", server.socket.display())));
    assert!(list.contains("vm1") && list.contains("vm2"), "{list}");
    let info: serde_json::Value = serde_json::from_str(&run_ok(Command::new("nbdinfo").arg("--json").arg(server.uri("vm2")))).unwrap();
    let e = &info["exports"][0];
    assert_eq!(e["export-size"], 64 << 20, "{info}");
    for flag in ["can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"] {
        assert_eq!(e[flag], true, "{flag}: {info}");
    }
    assert_eq!(e["is_read_only"], false);
    assert_eq!(e["block_size_minimum"], 512, "{info}");
    let r = server.stop();
    assert_eq!(r["flashmux"]["stop_reason"], "server-stopped");
}

#[test]
fn tcp_on_loopback_serves_too() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tmpdir("serve-tcp");
    let server = Server::start_at(&dir, &scenario(&dir, ""), &["--listen", "127.0.0.1:0"], dir.join("none"));
    // Port 0: the log says which port it got.
    let line = server.lines.iter().find(|l| l.contains("serving ")).unwrap().clone();
    let addr = line.split(" on tcp:").nth(1).and_then(|r| r.split(' ').next()).unwrap_or_else(|| panic!("{line}")).to_string();
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(Command::new("nbdinfo").arg("--json").arg(format!("nbd://{addr}/vm2")))).unwrap();
    assert_eq!(info["exports"][0]["export-size"], 64 << 20, "{info}");
    let r = server.stop();
    assert!(r["flashmux"]["serve"]["listen"].as_str().unwrap().starts_with("tcp:127.0.0.1:"));
}

#[test]
fn fio_random_writes_verify_through_the_nbd_engine_on_several_connections() {
    if !have("fio") {
        return;
    }
    for threads in ["per-connection", "single"] {
        fio_verifies(threads);
    }
}

fn fio_verifies(threads: &str) {
    let dir = tmpdir(&format!("serve-fio-{threads}"));
    let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads]);
    let out = run_ok(
        Command::new("fio")
            .current_dir(&dir)
            .args(["--name=verify", "--ioengine=nbd", "--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=8m"])
            .args(["--numjobs=4", "--offset_increment=8m", "--verify=crc32c", "--do_verify=1", "--output-format=json"])
            .arg(format!("--uri={}", server.uri("vm1"))),
    );
    let fio: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
    for job in fio["jobs"].as_array().unwrap() {
        assert_eq!(job["error"], 0, "{job}");
        assert_eq!(job["write"]["io_bytes"], 8 << 20);
        // The verify pass read everything back.
        assert_eq!(job["read"]["io_bytes"], 8 << 20);
    }
    let r = server.stop();
    let s = &r["flashmux"]["serve"];
    assert_eq!(s["io_threads"], threads);
    // fio's nbd engine connects once more per job to learn the size.
    assert!(s["connections"].as_u64().unwrap() >= 4, "{s}");
    assert_eq!(s["errors"], 0, "{s}");
    // Every request went through the model: 4 × 2048 writes and as many reads, plus flushes.
    let vm1 = &r["jobs"][0];
    assert_eq!(vm1["write"]["total_ios"], 8192, "{vm1}");
    assert_eq!(vm1["read"]["total_ios"], 8192, "{vm1}");
    assert!(s["timing_error_ns"]["count"].as_u64().unwrap() >= 16384, "{s}");
}

#[test]
fn qemu_img_copies_a_file_in_and_out_unchanged() {
    if !have("qemu-img") {
        return;
    }
    let dir = tmpdir("serve-qemu-img");
    let src = dir.join("src.raw");
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let data: Vec<u8> = (0..(24 << 20) / 8)
        .flat_map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Some zero runs, which qemu-img may write as zeroes instead of data.
            (if i % 4096 < 512 { 0 } else { x }).to_le_bytes()
        })
        .collect();
    std::fs::write(&src, &data).unwrap();
    let server = Server::start(&dir, &scenario(&dir, ""), &[]);
    run_ok(Command::new("qemu-img").args(["convert", "-n", "-f", "raw", "-O", "raw"]).arg(&src).arg(server.uri("vm2")));
    let back = dir.join("back.raw");
    run_ok(Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw"]).arg(server.uri("vm2")).arg(&back));
    // The export is larger than the file: the rest reads as zeros, which compare accepts.
    run_ok(Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&src).arg(&back));
    assert_eq!(std::fs::read(&back).unwrap()[..data.len()], data[..]);
    // vm1 was never written: zeros.
    let r = server.stop();
    assert!(r["jobs"][1]["write"]["io_bytes"].as_u64().unwrap() > 0);
}

// ---------------------------------------------------------------------------------------------
// A raw client, for what real clients never send.

struct Raw {
    s: UnixStream,
    size: u64,
}

const REQUEST_MAGIC: u32 = 0x2560_9513;

impl Raw {
    /// Connects and negotiates `export` with NBD_OPT_GO.
    fn connect(socket: &Path, export: &str) -> Raw {
        let mut s = UnixStream::connect(socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
        let mut opt = Vec::new();
        opt.extend_from_slice(b"IHAVEOPT");
        opt.extend_from_slice(&7u32.to_be_bytes()); // GO
        opt.extend_from_slice(&(4 + export.len() as u32 + 2).to_be_bytes());
        opt.extend_from_slice(&(export.len() as u32).to_be_bytes());
        opt.extend_from_slice(export.as_bytes());
        opt.extend_from_slice(&0u16.to_be_bytes());
        s.write_all(&opt).unwrap();
        let mut size = None;
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h).unwrap();
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
            let mut data = vec![0; len];
            s.read_exact(&mut data).unwrap();
            match kind {
                1 => break,
                3 if u16::from_be_bytes([data[0], data[1]]) == 0 => size = Some(u64::from_be_bytes(data[2..10].try_into().unwrap())),
                3 => {}
                _ => panic!("option reply {kind:#x}"),
            }
        }
        Raw { s, size: size.unwrap() }
    }

    fn send(&mut self, cmd: u16, flags: u16, cookie: u64, offset: u64, len: u32, data: &[u8]) {
        let mut r = Vec::with_capacity(28 + data.len());
        r.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        r.extend_from_slice(&flags.to_be_bytes());
        r.extend_from_slice(&cmd.to_be_bytes());
        r.extend_from_slice(&cookie.to_be_bytes());
        r.extend_from_slice(&offset.to_be_bytes());
        r.extend_from_slice(&len.to_be_bytes());
        r.extend_from_slice(data);
        self.s.write_all(&r).unwrap();
    }

    /// The next reply: (cookie, error).
    fn reply(&mut self) -> (u64, u32) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), 0x6744_6698);
        (u64::from_be_bytes(h[8..16].try_into().unwrap()), u32::from_be_bytes(h[4..8].try_into().unwrap()))
    }

    fn read(&mut self, cookie: u64, offset: u64, len: u32) -> Result<Vec<u8>, u32> {
        self.send(0, 0, cookie, offset, len, &[]);
        let (c, e) = self.reply();
        assert_eq!(c, cookie);
        if e != 0 {
            return Err(e);
        }
        let mut d = vec![0; len as usize];
        self.s.read_exact(&mut d).unwrap();
        Ok(d)
    }

    fn write(&mut self, cookie: u64, offset: u64, data: &[u8]) -> u32 {
        self.send(1, 0, cookie, offset, data.len() as u32, data);
        let (c, e) = self.reply();
        assert_eq!(c, cookie);
        e
    }
}

#[test]
fn data_reads_back_as_written_trimmed_and_zeroed() {
    let dir = tmpdir("serve-data");
    let server = Server::start(&dir, &scenario(&dir, ""), &[]);
    let mut c = Raw::connect(&server.socket, "vm2");
    let pattern: Vec<u8> = (0..65536u32).map(|i| (i * 7 + 3) as u8).collect();
    assert_eq!(c.write(1, 1 << 20, &pattern), 0);
    assert_eq!(c.read(2, 1 << 20, 65536).unwrap(), pattern);
    // Unaligned to the store's chunks, within a 512-byte sector grid.
    assert_eq!(c.read(3, (1 << 20) + 512, 1024).unwrap(), pattern[512..1536]);
    // FUA write, flush.
    c.send(1, 1, 4, 2 << 20, 4096, &[9u8; 4096]);
    assert_eq!(c.reply(), (4, 0));
    c.send(3, 0, 5, 0, 0, &[]);
    assert_eq!(c.reply(), (5, 0));
    assert_eq!(c.read(6, 2 << 20, 4096).unwrap(), vec![9u8; 4096]);
    // TRIM reads back as zeros; so does WRITE_ZEROES, with and without NO_HOLE.
    c.send(4, 0, 7, (1 << 20) + 4096, 8192, &[]);
    assert_eq!(c.reply(), (7, 0));
    let mut expect = pattern.clone();
    expect[4096..12288].fill(0);
    assert_eq!(c.read(8, 1 << 20, 65536).unwrap(), expect);
    c.send(6, 0, 9, (1 << 20) + 16384, 4096, &[]);
    assert_eq!(c.reply(), (9, 0));
    c.send(6, 2, 10, (1 << 20) + 32768, 4096, &[]);
    assert_eq!(c.reply(), (10, 0));
    expect[16384..20480].fill(0);
    expect[32768..36864].fill(0);
    assert_eq!(c.read(11, 1 << 20, 65536).unwrap(), expect);
    // Exports are separate: vm1's first MiB is untouched.
    let mut d = Raw::connect(&server.socket, "vm1");
    assert_eq!(d.read(1, 1 << 20, 65536).unwrap(), vec![0u8; 65536]);
    let r = server.stop();
    let vm2 = &r["jobs"][1];
    assert_eq!(vm2["write"]["total_ios"], 3, "two writes and a NO_HOLE write-zeroes: {vm2}");
    assert_eq!(vm2["trim"]["total_ios"], 2, "a trim and a write-zeroes: {vm2}");
    assert_eq!(vm2["read"]["total_ios"], 5);
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 1);
}

#[test]
fn qemu_io_and_nbdcopy_work_on_an_export() {
    if !have("qemu-io") || !have("nbdcopy") {
        return;
    }
    let dir = tmpdir("serve-qemu-io");
    let server = Server::start(&dir, &scenario(&dir, ""), &[]);
    let uri = server.uri("vm1");
    let out = run_ok(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0xab 64k 128k", "-c", "read -P 0xab 64k 128k", "-c", "read -P 0 0 64k", &uri]));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    // nbdcopy the whole export to a file and back into the other export.
    let copy = dir.join("vm1.img");
    run_ok(Command::new("nbdcopy").arg(&uri).arg(&copy));
    let img = std::fs::read(&copy).unwrap();
    assert_eq!(img.len(), 64 << 20);
    assert!(img[65536..65536 + 131072].iter().all(|&b| b == 0xab) && img[..65536].iter().all(|&b| b == 0));
    run_ok(Command::new("nbdcopy").arg(&copy).arg(server.uri("vm2")));
    let out = run_ok(Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0xab 64k 128k", &server.uri("vm2")]));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    server.stop();
}

#[test]
fn record_writes_the_requests_served_as_a_trace_flashmux_replays() {
    let dir = tmpdir("serve-record");
    let rec = dir.join("rec.iolog");
    let server = Server::start(&dir, &scenario(&dir, ""), &["--record", rec.to_str().unwrap()]);
    let mut c = Raw::connect(&server.socket, "vm2");
    assert_eq!(c.write(1, 1 << 20, &[5u8; 65536]), 0);
    let mut d = Raw::connect(&server.socket, "vm1");
    assert_eq!(d.read(2, 0, 4096).unwrap(), vec![0u8; 4096]);
    c.send(3, 0, 3, 0, 0, &[]);
    assert_eq!(c.reply(), (3, 0));
    let mut server = server;
    let r = server.stop_keeping_log();
    assert!(r.1.iter().any(|l| l.contains("recorded 3 requests to")), "{:?}", r.1);
    // fio's iolog: each export is a file, opened before its first request and closed at the
    // end; the times (µs since the server started) never go back.
    let text = std::fs::read_to_string(&rec).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "fio version 3 iolog");
    let ops: Vec<String> = lines[1..].iter().map(|l| l.split_once(' ').unwrap().1.to_string()).collect();
    assert_eq!(
        ops,
        ["vm2 add", "vm2 open", "vm2 write 1048576 65536", "vm1 add", "vm1 open", "vm1 read 0 4096", "vm2 sync 0 0", "vm2 close", "vm1 close"],
        "{text}"
    );
    let times: Vec<u64> = lines[1..].iter().map(|l| l.split(' ').next().unwrap().parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{text}");
    // flashmux replays it, one tenant per export (fio iolog's file name is its device).
    let o = flashmux().arg("replay").arg(&rec).args(["--tenant-by", "device", "--no-progress", "-o"]).arg(dir.join("replay")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("replay/results.json")).unwrap()).unwrap();
    assert_eq!(v["flashmux"]["tenants"].as_array().unwrap().len(), 2, "{v}");
    // Bad flags are refused before anything is served.
    let o = flashmux().args(["serve", "--record", rec.to_str().unwrap(), "--record-format", "msr"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--record-format: cannot write 'msr': expected one of fio-iolog, mqsim, blkparse"));
    let o = flashmux().args(["serve", "--record", rec.to_str().unwrap(), "--timing", "off"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--record: the requests recorded are those the model serves"));
    let o = flashmux().args(["serve", "--record", "/nonexistent-dir/rec.iolog"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--record: /nonexistent-dir/rec.iolog: "));
}

#[test]
fn bad_requests_get_error_codes_and_the_connection_stays() {
    for threads in ["per-connection", "single"] {
        bad_requests(threads);
    }
}

fn bad_requests(threads: &str) {
    let dir = tmpdir(&format!("serve-bad-requests-{threads}"));
    let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads]);
    let mut c = Raw::connect(&server.socket, "vm1");
    assert_eq!(c.size, 64 << 20);
    assert_eq!(c.write(1, 4096, &[7u8; 4096]), 0);
    // Beyond the export: a write gets ENOSPC, a read EINVAL; misaligned requests EINVAL.
    assert_eq!(c.write(2, (64 << 20) - 2048, &[1u8; 4096]), 28);
    assert_eq!(c.read(3, 64 << 20, 4096), Err(22));
    assert_eq!(c.write(4, 100, &[1u8; 512]), 22);
    assert_eq!(c.read(5, 0, 100), Err(22));
    // An unknown command.
    c.send(42, 0, 6, 0, 0, &[]);
    assert_eq!(c.reply(), (6, 22));
    // Still connected, and nothing above touched the data.
    assert_eq!(c.read(7, 4096, 4096).unwrap(), vec![7u8; 4096]);
    assert_eq!(c.read(8, 0, 4096).unwrap(), vec![0u8; 4096]);
    // A client that sends half a request and goes away.
    let mut d = Raw::connect(&server.socket, "vm2");
    d.send(1, 0, 9, 0, 65536, &[1u8; 1000]);
    drop(d);
    // A client that sends garbage instead of a handshake.
    let mut g = UnixStream::connect(&server.socket).unwrap();
    let mut greeting = [0u8; 18];
    g.read_exact(&mut greeting).unwrap();
    g.write_all(b"this is not an NBD client at all").unwrap();
    drop(g);
    // A request with a bad magic closes its connection.
    let mut m = Raw::connect(&server.socket, "vm2");
    m.s.write_all(&[0xffu8; 28]).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(m.s.read(&mut buf).unwrap_or(0), 0, "the server closed the connection");
    // The first connection is unaffected.
    assert_eq!(c.read(10, 4096, 4096).unwrap(), vec![7u8; 4096]);
    c.send(2, 0, 11, 0, 0, &[]); // NBD_CMD_DISC
    let r = server.stop();
    let s = &r["flashmux"]["serve"];
    assert_eq!(s["errors"], 5, "{s}");
}

#[test]
fn a_client_that_does_not_read_its_replies_holds_up_no_one() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-slow-reader-{threads}"));
        let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads]);
        let mut slow = Raw::connect(&server.socket, "vm1");
        assert_eq!(slow.write(1, 0, &vec![5u8; 1 << 20]), 0);
        // 48 MiB of replies, far more than a socket buffers; none read yet.
        for i in 0..48u64 {
            slow.send(0, 0, 100 + i, 0, 1 << 20, &[]);
        }
        let mut other = Raw::connect(&server.socket, "vm2");
        for i in 0..200u64 {
            assert_eq!(other.write(i, i * 4096, &[i as u8; 4096]), 0);
            assert_eq!(other.read(1000 + i, i * 4096, 4096).unwrap(), vec![i as u8; 4096]);
        }
        // The slow client still gets every reply, whole and in order.
        for i in 0..48u64 {
            let (cookie, error) = slow.reply();
            assert_eq!((cookie, error), (100 + i, 0));
            let mut d = vec![0u8; 1 << 20];
            slow.s.read_exact(&mut d).unwrap();
            assert!(d.iter().all(|&b| b == 5));
        }
        server.stop();
    }
}

#[test]
fn connections_beyond_the_limit_are_refused_and_the_others_served() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-max-conn-{threads}"));
        max_connections(&dir, threads);
    }
}

fn max_connections(dir: &Path, threads: &str) {
    let server = Server::start(dir, &scenario(dir, ""), &["--max-connections", "2", "--io-threads", threads]);
    let mut a = Raw::connect(&server.socket, "vm1");
    let mut b = Raw::connect(&server.socket, "vm2");
    let mut c = UnixStream::connect(&server.socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 18];
    assert_eq!(c.read(&mut buf).unwrap_or(0), 0, "the third connection is closed at once");
    assert_eq!(a.write(1, 0, &[1u8; 4096]), 0);
    assert_eq!(b.read(2, 0, 4096).unwrap(), vec![0u8; 4096]);
    let r = server.stop();
    assert_eq!(r["flashmux"]["serve"]["connections_refused"], 1);
}

#[test]
fn no_acknowledged_write_is_lost_when_the_server_is_stopped_during_writes() {
    for threads in ["per-connection", "single"] {
        stop_during_writes(threads);
    }
}

fn stop_during_writes(threads: &str) {
    let dir = tmpdir(&format!("serve-sigterm-{threads}"));
    let backing = dir.join("backing.img");
    let mut server = Server::start(&dir, &scenario(&dir, ""), &["--backing", backing.to_str().unwrap(), "--io-threads", threads]);
    let mut c = Raw::connect(&server.socket, "vm2");
    // Writes at queue depth 8 until the server goes; every acknowledged block is recorded.
    let block = |i: u64| -> Vec<u8> { (0..4096u64).map(|b| (i * 31 + b) as u8 | 1).collect() };
    let mut acked = Vec::new();
    let mut next = 0u64;
    let mut inflight = 0;
    let kill_after = 400;
    loop {
        while inflight < 8 && next < 16384 {
            let data = block(next);
            let mut r = Vec::new();
            r.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
            r.extend_from_slice(&0u16.to_be_bytes());
            r.extend_from_slice(&1u16.to_be_bytes());
            r.extend_from_slice(&next.to_be_bytes());
            r.extend_from_slice(&(next * 4096).to_be_bytes());
            r.extend_from_slice(&4096u32.to_be_bytes());
            r.extend_from_slice(&data);
            if c.s.write_all(&r).is_err() {
                break;
            }
            next += 1;
            inflight += 1;
        }
        let mut h = [0u8; 16];
        if c.s.read_exact(&mut h).is_err() {
            break;
        }
        inflight -= 1;
        if u32::from_be_bytes(h[4..8].try_into().unwrap()) == 0 {
            acked.push(u64::from_be_bytes(h[8..16].try_into().unwrap()));
        }
        if acked.len() == kill_after {
            Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap();
        }
    }
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(acked.len() >= kill_after, "{} writes acknowledged", acked.len());
    let img = std::fs::read(&backing).unwrap();
    assert_eq!(img.len(), 233_406_464, "the backing file holds the whole drive");
    for &i in &acked {
        let at = (64 << 20) + i as usize * 4096;
        assert_eq!(img[at..at + 4096], block(i)[..], "acknowledged block {i} is in the backing file");
    }
}

#[test]
fn garbage_collection_runs_under_serve() {
    if !have("fio") {
        return;
    }
    let dir = tmpdir("serve-gc");
    // An aged, full drive: overwrites soon need garbage collection.
    let server = Server::start(&dir, &scenario(&dir, "[precondition]\nstate = \"aged\"\nfill = 1.0\n"), &["--stats-interval", "200ms"]);
    let mut server = server;
    run_ok(
        Command::new("fio")
            .current_dir(&dir)
            .args(["--name=overwrite", "--ioengine=nbd", "--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=64m", "--io_size=128m"])
            .arg(format!("--uri={}", server.uri("vm1"))),
    );
    // The live stats say it as it happens.
    let line = server.wait_for("GC moved");
    assert!(line.contains("vm1: read"), "{line}");
    let out = server.out.clone();
    let r = server.stop();
    let moved = r["flashmux"]["tenants"][0]["gc_pages_moved"].as_u64().unwrap_or(0);
    assert!(moved > 0, "GC moved nothing: {}", r["flashmux"]["tenants"][0]);
    // The timeline streamed into the output directory as the server ran: its rows add up to
    // the same GC work.
    let csv = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let in_rows: u64 = csv.lines().skip(1).filter(|l| l.split(',').nth(2) == Some("vm1")).map(|l| l.split(',').nth(9).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(in_rows, moved, "{csv}");
}

#[test]
fn a_stop_while_the_drive_is_aged_ends_the_server_before_it_serves() {
    let dir = tmpdir("serve-stop-aging");
    let s = write(
        &dir,
        "big.toml",
        "[device]\npreset = \"tlc-nvme\"\ncapacity = \"256GiB\"\n[precondition]\nstate = \"aged\"\n[[tenant]]\nname = \"vm1\"\nregion = \"whole\"\n",
    );
    let sock = dir.join("fm.sock");
    let child = flashmux()
        .arg("serve")
        .arg(&s)
        .arg("--socket")
        .arg(&sock)
        .arg("-o")
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Aging 256 GiB takes tens of seconds; a second in, it is under way.
    std::thread::sleep(Duration::from_secs(1));
    let sent = std::time::Instant::now();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert!(sent.elapsed() < Duration::from_secs(20), "{:?} from SIGINT to exit", sent.elapsed());
    assert!(e.contains("nothing was served") && !sock.exists(), "{e}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap()).unwrap();
    assert_eq!(r["flashmux"]["device"]["precondition"]["interrupted"], true);
}

/// Undoes the filesystem test's mounts, in reverse order, however the test ends.
#[derive(Default)]
struct Mounts {
    mounted: Option<PathBuf>,
    loop_dev: Option<String>,
    fuse: Option<(PathBuf, Child)>,
}

impl Drop for Mounts {
    fn drop(&mut self) {
        if let Some(m) = self.mounted.take() {
            let _ = Command::new("umount").arg(&m).status();
        }
        if let Some(l) = self.loop_dev.take() {
            let _ = Command::new("losetup").args(["-d", &l]).status();
        }
        if let Some((dir, mut child)) = self.fuse.take() {
            let _ = Command::new("fusermount3").arg("-u").arg(&dir).status();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_filesystem_on_the_export_keeps_its_files_across_remounts() {
    for tool in ["nbdfuse", "losetup", "mkfs.ext4", "mount", "fusermount3"] {
        if !have(tool) {
            return;
        }
    }
    if !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        eprintln!("skipped: this machine has no FUSE or no loop devices (/dev/fuse, /dev/loop-control)");
        return;
    }
    let dir = tmpdir("serve-fs");
    let server = Server::start(&dir, &scenario(&dir, ""), &[]);
    let fuse = dir.join("fuse");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&fuse).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let mut m = Mounts::default();
    let child = Command::new("nbdfuse").arg(&fuse).arg(server.uri("vm1")).stderr(Stdio::piped()).spawn().unwrap();
    m.fuse = Some((fuse.clone(), child));
    let image = fuse.join("nbd");
    for _ in 0..100 {
        if image.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !image.exists() {
        eprintln!("skipped: nbdfuse could not mount here (FUSE not permitted?)");
        return;
    }
    let o = Command::new("losetup").args(["--direct-io=on", "-f", "--show"]).arg(&image).output().unwrap();
    if !o.status.success() {
        eprintln!("skipped: no loop device could be set up: {}", String::from_utf8_lossy(&o.stderr).trim());
        return;
    }
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    m.loop_dev = Some(dev.clone());
    run_ok(Command::new("mkfs.ext4").args(["-q", "-F", &dev]));
    run_ok(Command::new("mount").arg(&dev).arg(&mnt));
    m.mounted = Some(mnt.clone());
    let files: Vec<(String, Vec<u8>)> = (0..4u64)
        .map(|f| {
            let mut x = 0x9e37_79b9_7f4a_7c15 ^ f;
            let len = (1 + f as usize) << 20;
            let bytes = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            (format!("file{f}"), bytes)
        })
        .collect();
    for (name, bytes) in &files {
        std::fs::write(mnt.join(name), bytes).unwrap();
    }
    run_ok(Command::new("umount").arg(&mnt));
    m.mounted = None;
    run_ok(Command::new("mount").arg(&dev).arg(&mnt));
    m.mounted = Some(mnt.clone());
    for (name, bytes) in &files {
        assert!(std::fs::read(mnt.join(name)).unwrap() == *bytes, "{name} changed across the remount");
    }
    drop(m);
    let r = server.stop();
    assert!(r["jobs"][0]["write"]["io_bytes"].as_u64().unwrap() >= 10 << 20, "the files' data went through the model");
}

#[test]
fn bad_serve_input_is_refused_with_a_clear_message() {
    let dir = tmpdir("serve-bad-input");
    let no_export = write(&dir, "fio-only.toml", &format!("{DRIVE}\n[[tenant]]\nname = \"a\"\nfio = \"[j]\\nrw=read\\nsize=1m\\n\"\n"));
    let socket = dir.join("s.sock");
    let sock = socket.to_str().unwrap();
    // A regular file where the socket should go is refused, and left alone.
    let regular = write(&dir, "not-a-socket", "keep me");
    let backing_dir = format!("--backing={}", dir.display());
    let no_dir_backing = "--backing=/nonexistent-dir/drive.img";
    for (args, code, needle) in [
        (vec![no_export.to_str().unwrap()], 2, "no tenant to export".to_string()),
        (vec!["--listen", "0.0.0.0:10809"], 2, "not a loopback address".into()),
        (vec!["--stats-interval", "often"], 2, "--stats-interval".into()),
        (vec!["--max-connections", "0"], 2, "--max-connections".into()),
        (vec!["--io-threads", "many"], 2, "many".into()),
        (vec!["--reply-memory", "1MiB"], 2, "--reply-memory: 1MiB is less than".into()),
        (vec!["--reply-memory", "lots"], 2, "--reply-memory".into()),
        (vec!["--idle-timeout", "0s"], 2, "--idle-timeout".into()),
        (vec!["--handshake-timeout", "soon"], 2, "--handshake-timeout".into()),
        (vec!["--socket", "/nonexistent-dir/fm.sock"], 2, "--socket /nonexistent-dir/fm.sock: the directory /nonexistent-dir does not exist".into()),
        (vec!["--socket", regular.to_str().unwrap()], 2, format!("--socket {}: the path exists and is not a socket", regular.display())),
        (vec!["--socket", sock, &backing_dir], 2, format!("--backing {}: it is a directory", dir.display())),
        (vec!["--socket", sock, no_dir_backing], 2, "--backing /nonexistent-dir/drive.img: the directory /nonexistent-dir does not exist".into()),
    ] {
        let o = flashmux().arg("serve").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(&needle), "{args:?}: {err}");
        // One message, said once.
        assert_eq!(err.matches("error:").count(), 1, "{args:?}: {err}");
        assert!(!err.contains("os error") || err.matches("os error").count() == 1, "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&regular).unwrap(), "keep me", "a file at the socket path is never removed");
    assert!(!socket.exists(), "no socket is left behind by a server that did not start");
    // A file the server may not write (only testable without root, which may write anything).
    let read_only = write(&dir, "read-only.img", "");
    let mut perms = std::fs::metadata(&read_only).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&read_only, perms).unwrap();
    if std::fs::OpenOptions::new().write(true).open(&read_only).is_err() {
        let o = flashmux().arg("serve").args(["--socket", sock, "--backing"]).arg(&read_only).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("--backing {}: cannot open it for reading and writing", read_only.display())), "{err}");
    } else {
        eprintln!("skipped the read-only backing file: running as root, which may write it");
    }
    // A tenant without a workload is for serve only.
    let export = scenario(&dir, "");
    let o = flashmux().arg("run").arg(&export).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tenant[0] (vm1): no workload"));
}

// ---------------------------------------------------------------------------------------------
// Clients that play by the rules are never dropped; reply memory is bounded by pausing reads.

/// One export, `ssd`, the whole of a clean 16 GiB drive: room for reads of 32 MiB at depth 16.
fn big_scenario(dir: &Path) -> PathBuf {
    write(dir, "big.toml", "[device]\npreset = \"tlc-nvme\"\ncapacity = \"16GiB\"\n[[tenant]]\nname = \"ssd\"\nregion = \"whole\"\n")
}

/// The server's peak resident memory so far, in bytes.
fn peak_rss(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// The `flashmux.serve` record's reply-memory numbers hold: never more owed than the bounds.
fn check_reply_bounds(s: &serde_json::Value) {
    let peak = s["reply_bytes_peak"].as_u64().unwrap_or_else(|| panic!("{s}"));
    assert!(peak > 0, "{s}");
    assert!(peak <= s["reply_bytes_limit"].as_u64().unwrap(), "{s}");
    assert!(s["reply_bytes_per_connection"].as_u64().unwrap() <= s["reply_bytes_limit"].as_u64().unwrap(), "{s}");
}

#[test]
fn fio_reads_of_the_largest_block_at_depth_16_are_never_dropped() {
    if !have("fio") {
        return;
    }
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-fio-32m-{threads}"));
        let server = Server::start(&dir, &big_scenario(&dir), &["--io-threads", threads]);
        // 32 MiB is the largest block the server advertises; 16 of them in flight are 512 MiB
        // of replies, more than a connection may owe: the server must pause, not disconnect.
        let out = run_ok(
            Command::new("fio")
                .current_dir(&dir)
                .args(["--name=big", "--ioengine=nbd", "--rw=read", "--bs=32m", "--iodepth=16", "--size=2g", "--output-format=json"])
                .arg(format!("--uri={}", server.uri("ssd"))),
        );
        let fio: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
        let job = &fio["jobs"][0];
        assert_eq!(job["error"], 0, "{threads}: {job}");
        assert_eq!(job["read"]["io_bytes"], 2u64 << 30, "{threads}: {job}");
        let rss = peak_rss(&server);
        let r = server.stop();
        let s = &r["flashmux"]["serve"];
        assert_eq!(s["connections_dropped"], 0, "{threads}: {s}");
        assert_eq!(s["errors"], 0, "{threads}: {s}");
        assert!(s["read_pauses"].as_u64().unwrap() > 0, "{threads}: back-pressure never paused reading: {s}");
        // One client: it alone is bounded by the per-connection bound.
        check_reply_bounds(s);
        assert!(s["reply_bytes_peak"].as_u64().unwrap() <= s["reply_bytes_per_connection"].as_u64().unwrap(), "{threads}: {s}");
        eprintln!("{threads}: fio read {} KiB/s; server peak RSS {} MiB", job["read"]["bw"], rss >> 20);
    }
}

#[test]
fn a_client_that_reads_its_replies_late_is_paused_not_dropped() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-late-reader-{threads}"));
        let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads]);
        let mut late = Raw::connect(&server.socket, "vm1");
        let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        assert_eq!(late.write(1, 0, &block), 0);
        // 320 MiB of replies asked for, none read for a while: far more than a connection may
        // owe (and more than the 256 MiB at which such a client used to be dropped).
        for i in 0..320u64 {
            late.send(0, 0, 100 + i, 0, 1 << 20, &[]);
        }
        std::thread::sleep(Duration::from_millis(1500));
        // Meanwhile another client is served on time.
        let mut other = Raw::connect(&server.socket, "vm2");
        for i in 0..50u64 {
            assert_eq!(other.write(i, i * 4096, &[i as u8; 4096]), 0);
            assert_eq!(other.read(1000 + i, i * 4096, 4096).unwrap(), vec![i as u8; 4096]);
        }
        let rss = peak_rss(&server);
        for i in 0..320u64 {
            assert_eq!(late.reply(), (100 + i, 0), "{threads}");
            let mut d = vec![0u8; 1 << 20];
            late.s.read_exact(&mut d).unwrap();
            assert!(d == block, "{threads}: reply {i}");
        }
        let r = server.stop();
        let s = &r["flashmux"]["serve"];
        assert_eq!(s["connections_dropped"], 0, "{threads}: {s}");
        assert!(s["read_pauses"].as_u64().unwrap() > 0, "{threads}: {s}");
        check_reply_bounds(s);
        // The memory a late reader holds is its bound's, not everything it asked for.
        assert!(s["reply_bytes_peak"].as_u64().unwrap() <= s["reply_bytes_per_connection"].as_u64().unwrap(), "{threads}: {s}");
        assert!(rss < 256 << 20, "{threads}: peak RSS {} MiB", rss >> 20);
        eprintln!("{threads}: peak RSS {} MiB with a late reader", rss >> 20);
    }
}

#[test]
fn the_total_reply_memory_is_bounded_by_pausing_reads_never_by_dropping() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-reply-memory-{threads}"));
        let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads, "--reply-memory", "96MiB"]);
        let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 241) as u8).collect();
        let mut a = Raw::connect(&server.socket, "vm1");
        let mut b = Raw::connect(&server.socket, "vm1");
        let mut c = Raw::connect(&server.socket, "vm1");
        assert_eq!(c.write(1, 0, &block), 0);
        // Two clients ask for 64 MiB of replies each and read none: together more than the
        // 96 MiB all connections may owe.
        for (n, x) in [&mut a, &mut b].into_iter().enumerate() {
            for i in 0..64u64 {
                x.send(0, 0, 100 * n as u64 + i, 0, 1 << 20, &[]);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        // A third client's read waits for room: no reply while the others hold it all...
        c.send(0, 0, 7, 0, 1 << 20, &[]);
        c.s.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
        let mut h = [0u8; 16];
        let early = c.s.read(&mut h);
        assert!(early.is_err(), "{threads}: a reply came while the server owed its whole reply memory: {early:?}");
        // ...and comes once one of them reads its replies.
        for i in 0..64u64 {
            assert_eq!(a.reply(), (i, 0), "{threads}");
            let mut d = vec![0u8; 1 << 20];
            a.s.read_exact(&mut d).unwrap();
            assert!(d == block, "{threads}");
        }
        c.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        assert_eq!(c.reply(), (7, 0), "{threads}");
        let mut d = vec![0u8; 1 << 20];
        c.s.read_exact(&mut d).unwrap();
        assert!(d == block, "{threads}");
        for i in 0..64u64 {
            assert_eq!(b.reply(), (100 + i, 0), "{threads}");
            b.s.read_exact(&mut d).unwrap();
            assert!(d == block, "{threads}");
        }
        let r = server.stop();
        let s = &r["flashmux"]["serve"];
        assert_eq!(s["connections_dropped"], 0, "{threads}: {s}");
        assert_eq!(s["reply_bytes_limit"], 96 << 20, "{threads}: {s}");
        check_reply_bounds(s);
        // The third connection had to wait, and so did one of the first two at least (together
        // they asked for more than all may owe).
        assert!(s["read_pauses"].as_u64().unwrap() >= 2, "{threads}: {s}");
    }
}

#[test]
fn a_client_that_reads_nothing_for_the_idle_timeout_is_dropped_logged_and_counted() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-idle-{threads}"));
        let mut server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads, "--idle-timeout", "1s", "--stats-interval", "500ms"]);
        let mut idle = Raw::connect(&server.socket, "vm1");
        assert_eq!(idle.write(1, 0, &[3u8; 4096]), 0);
        for i in 0..100u64 {
            idle.send(0, 0, 100 + i, 0, 1 << 20, &[]);
        }
        // Another client is served while the idle one waits to be dropped.
        let mut other = Raw::connect(&server.socket, "vm2");
        assert_eq!(other.write(1, 0, &[4u8; 4096]), 0);
        let line = server.wait_for(": dropped");
        assert!(line.contains("(vm1): dropped: read none of its replies for 1 s"), "{line}");
        assert_eq!(other.read(2, 0, 4096).unwrap(), vec![4u8; 4096]);
        // The stats line counts it.
        let stats = server.wait_for("1 dropped");
        assert!(stats.contains("server:"), "{stats}");
        // What the socket had taken before the drop still arrives; then the connection ends.
        let mut rest = Vec::new();
        let _ = idle.s.read_to_end(&mut rest);
        assert!(rest.len() < 100 << 20, "{threads}: {} bytes", rest.len());
        let r = server.stop();
        let s = &r["flashmux"]["serve"];
        assert_eq!(s["connections_dropped"], 1, "{threads}: {s}");
    }
}

#[test]
fn silent_connections_never_lock_out_a_client_that_negotiates() {
    for threads in ["per-connection", "single"] {
        let dir = tmpdir(&format!("serve-silent-{threads}"));
        let server = Server::start(&dir, &scenario(&dir, ""), &["--io-threads", threads, "--max-connections", "8"]);
        // As many connections as may be served, none of which ever says a word.
        let silent: Vec<UnixStream> = (0..8).map(|_| UnixStream::connect(&server.socket).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        let start = std::time::Instant::now();
        let mut c = Raw::connect(&server.socket, "vm1");
        assert_eq!(c.write(1, 0, &[9u8; 4096]), 0);
        assert_eq!(c.read(2, 0, 4096).unwrap(), vec![9u8; 4096]);
        let took = start.elapsed();
        assert!(took < Duration::from_secs(2), "{threads}: a real client waited {took:?} behind silent ones");
        eprintln!("{threads}: served in {:.1} ms beside 8 silent connections", took.as_secs_f64() * 1e3);
        drop(silent);
        let r = server.stop();
        let s = &r["flashmux"]["serve"];
        assert!(s["handshakes_evicted"].as_u64().unwrap() >= 1, "{threads}: {s}");
    }
}

#[test]
fn a_handshake_is_bounded_in_total_time_and_its_timeout_said_plainly() {
    let dir = tmpdir("serve-handshake-timeout");
    let mut server = Server::start(&dir, &scenario(&dir, ""), &["--handshake-timeout", "1s"]);
    // One client says nothing; another trickles its handshake a byte at a time, each byte well
    // within the timeout: both are closed once the handshake has taken a second.
    let mut silent = UnixStream::connect(&server.socket).unwrap();
    let mut trickle = UnixStream::connect(&server.socket).unwrap();
    let start = std::time::Instant::now();
    let mut greeting = [0u8; 18];
    trickle.read_exact(&mut greeting).unwrap();
    // Client flags, then NBD_OPT_GO for the default export: 26 bytes, 2.6 s at this pace.
    let mut bytes = 3u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"IHAVEOPT");
    for word in [7u32, 6, 0] {
        bytes.extend_from_slice(&word.to_be_bytes());
    }
    bytes.extend_from_slice(&[0, 0]);
    trickle.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let mut closed = false;
    for b in bytes {
        std::thread::sleep(Duration::from_millis(100));
        if trickle.write_all(&[b]).is_err() || matches!(trickle.read(&mut [0u8; 1]), Ok(0)) {
            closed = true;
            break;
        }
    }
    assert!(closed, "a handshake trickled over {:?} was let through", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(2), "closed only after {:?}", start.elapsed());
    let mut buf = Vec::new();
    silent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = silent.read_to_end(&mut buf);
    assert_eq!(buf.len(), 18, "the silent client got the greeting, then the connection closed");
    let line = server.wait_for("no handshake within");
    assert!(line.contains(": no handshake within 1 s: closed"), "{line}");
    assert!(!line.contains("os error"), "{line}");
    let r = server.stop();
    assert_eq!(r["flashmux"]["serve"]["handshakes_timed_out"], 2, "{}", r["flashmux"]["serve"]);
}

/// Runs `cmd`, which should end by itself; one still running after `limit` is killed and fails
/// the test.
fn exits_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{cmd:?} was still running after {limit:?}:\n{}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn two_servers_never_share_a_backing_file() {
    let dir = tmpdir("serve-backing-lock");
    let backing = dir.join("drive.img");
    let scen = scenario(&dir, "");
    let server = Server::start(&dir, &scen, &["--backing", backing.to_str().unwrap()]);
    let o = exits_within(
        flashmux().arg("serve").arg(&scen).arg("--socket").arg(dir.join("second.sock")).arg("--backing").arg(&backing).arg("-o").arg(dir.join("out2")),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("--backing {}: in use by another process (PID {}, flashmux)", backing.display(), server.child.id())), "{err}");
    assert!(!dir.join("second.sock").exists());
    server.stop();
    // Once the first server has gone, the file is free again.
    let again = Server::start(&dir, &scen, &["--backing", backing.to_str().unwrap()]);
    again.stop();
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = tmpdir("serve-stale-socket");
    let socket = dir.join("fm.sock");
    // A socket file nobody listens on any more, as a killed server leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let scen = scenario(&dir, "");
    let server = Server::start(&dir, &scen, &[]);
    // A second server on the live socket is refused, and the first keeps it.
    let o = exits_within(flashmux().arg("serve").arg(&scen).arg("--socket").arg(&socket).arg("-o").arg(dir.join("out2")), Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("--socket {}: a server is already listening on it", socket.display())), "{err}");
    let mut c = Raw::connect(&server.socket, "vm1");
    assert_eq!(c.write(1, 0, &[1u8; 4096]), 0);
    server.stop();
}
