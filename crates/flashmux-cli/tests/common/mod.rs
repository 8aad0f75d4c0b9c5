//! Helpers shared by the command-line tests (each test file is its own crate; not every file uses
//! every helper).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `flashmux` binary under test.
pub fn flashmux() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flashmux"))
}

/// A fresh, empty directory for one test.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flashmux-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A small, fast drive for command-line tests.
pub const SMALL: &str = r#"
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 64
[device.ftl]
overprovisioning = 0.15
[device.buffer]
size = "256KiB"
"#;
