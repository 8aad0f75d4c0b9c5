//! `flashmux import mqsim` as users run it: a scenario on stdout or in `-o`'s files, numbered
//! per IO_Scenario, that `flashmux run` runs; bad input exits 2 with the file and the line. The
//! MQSim files are flashmux's own, under tests/fixtures/mqsim/, shaped like the ones MQSim ships.

mod common;

use common::{flashmux, stderr, tmpdir, write};
use std::path::PathBuf;
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mqsim").join(name)
}

fn import(args: &[&std::ffi::OsStr]) -> Output {
    flashmux().arg("import").arg("mqsim").args(args).output().unwrap()
}

/// The fixture workload's first IO_Scenario alone.
fn one_scenario() -> String {
    let wl = std::fs::read_to_string(fixture("workload.xml")).unwrap();
    let end = wl.find("</IO_Scenario>").unwrap() + "</IO_Scenario>".len();
    format!("{}\n</MQSim_IO_Scenarios>\n", &wl[..end])
}

#[test]
fn one_io_scenario_goes_to_stdout_with_the_warnings_on_stderr() {
    let dir = tmpdir("import-stdout");
    let wl = write(&dir, "one.xml", &one_scenario());
    let o = import(&[fixture("ssd.xml").as_os_str(), wl.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(toml.starts_with("# Imported from MQSim's "), "{toml}");
    assert!(toml.contains("name = \"one\"\nseed = 42\n"), "{toml}");
    assert_eq!(toml.matches("[[tenant]]").count(), 2, "{toml}");
    let e = stderr(&o);
    assert!(e.lines().all(|l| l.starts_with("warning: ")), "{e}");
    let intensity = format!("warning: {}:29: Intensity: ", wl.display());
    assert!(e.contains(&intensity), "{intensity}: {e}");
}

#[test]
fn several_io_scenarios_go_to_numbered_files_that_run() {
    let dir = tmpdir("import-files");
    let out = dir.join("mq.toml");
    let o =
        import(&[fixture("ssd.xml").as_os_str(), fixture("workload.xml").as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.exists());
    for k in 1..=3 {
        let s = dir.join(format!("mq-{k}.toml"));
        assert!(stderr(&o).contains(&format!("wrote {} (workload-{k})", s.display())), "{}", stderr(&o));
        let r = flashmux()
            .arg("run")
            .arg(&s)
            .args(["--time", "5ms", "--no-progress", "-o"])
            .arg(dir.join(format!("out{k}")))
            .output()
            .unwrap();
        assert!(r.status.success(), "mq-{k}.toml: {}", stderr(&r));
    }
    let trace = std::fs::read_to_string(dir.join("mq-3.toml")).unwrap();
    let path = std::fs::canonicalize(fixture("traces/small.trace")).unwrap();
    assert!(trace.contains(&format!("path = \"{}\"", path.display())), "{trace}");
}

#[test]
fn several_io_scenarios_on_stdout_are_refused() {
    let o = import(&[fixture("ssd.xml").as_os_str(), fixture("workload.xml").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("the workload has 3 IO_Scenarios, one scenario file each: give -o NAME.toml"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn malformed_xml_and_refusals_exit_2_with_the_file_and_line() {
    let dir = tmpdir("import-bad");
    let ssd = std::fs::read_to_string(fixture("ssd.xml")).unwrap();
    let broken = write(&dir, "broken.xml", &ssd.replacen("</Seed>", "</Sead>", 1));
    let o = import(&[broken.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let expected = format!("flashmux: error: {}:14: XML: not well-formed XML: ", broken.display());
    assert!(stderr(&o).starts_with(&expected), "{expected}: {}", stderr(&o));
    let sata = write(&dir, "sata.xml", &ssd.replacen("<HostInterface_Type>NVME", "<HostInterface_Type>SATA", 1));
    let o =
        import(&[sata.as_os_str(), fixture("workload.xml").as_os_str(), "-o".as_ref(), dir.join("x.toml").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let expected = format!("flashmux: error: {}:16: HostInterface_Type: SATA: ", sata.display());
    assert!(stderr(&o).starts_with(&expected), "{expected}: {}", stderr(&o));
    assert!(!dir.join("x-1.toml").exists(), "nothing written for a refused import");
    let o = import(&[dir.join("none.xml").as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("none.xml: file: cannot read it"), "{}", stderr(&o));
}
