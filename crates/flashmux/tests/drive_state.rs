//! Saved drives (`device::drive_state`): a run that loads the drive `Simulator::save_drive_state`
//! wrote gives byte-identical results to one that aged the drive itself, on every kind of aging
//! and mapping; a file that does not fit, is damaged or is not a drive state is refused with its
//! path and what is wrong, never a panic.

use flashmux::config::Scenario;
use flashmux::report::results_json;
use flashmux::sim::{SimError, Simulator};
use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flashmux-drive-state-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two tenants on a small drive: a sequential and a random writer, 300 ms.
fn scenario(device: &str, precondition: &str, extra: &str) -> String {
    format!(
        r#"
seed = 5
[device]
{device}
[precondition]
{precondition}
[stop]
time = "2s"
{extra}
[[tenant]]
name = "seq"
fio = """
[s]
rw=write
bs=64k
iodepth=2
direct=1
time_based
runtime=1h
"""
[[tenant]]
name = "rand"
fio = """
[r]
rw=randrw
rwmixread=50
bs=4k
iodepth=8
direct=1
time_based
runtime=1h
"""
"#
    )
}

fn load(text: &str, base: &Path) -> Scenario {
    Scenario::from_toml(text, "s.toml", base).unwrap()
}

fn with_state(text: &str) -> String {
    text.replacen("[precondition]\n", "[precondition]\nstate_file = \"drive.fmstate\"\n", 1)
}

/// Ages in place, saves, loads: the results' JSON must be the same, byte for byte.
fn round_trip(name: &str, text: &str) {
    let d = dir(name);
    let aged = Simulator::new(load(text, &d)).unwrap();
    let bytes = aged.save_drive_state(&d.join("drive.fmstate")).unwrap();
    assert!(bytes > 0);
    let mut aged = aged;
    aged.check_invariants_every(5_000);
    aged.run();
    let a = aged.finish();
    let mut loaded = Simulator::new(load(&with_state(text), &d)).unwrap();
    loaded.check_invariants_every(5_000);
    loaded.run();
    let b = loaded.finish();
    assert!(a.requests_completed > 500, "{name}: the run did something");
    let (a, b) = (results_json(&a, true), results_json(&b, true));
    if let Some((i, (x, y))) = a.lines().zip(b.lines()).enumerate().find(|(_, (x, y))| x != y) {
        panic!("{name}: loading the drive changed the results: line {}: {x} (aged) vs {y} (loaded)", i + 1);
    }
    assert_eq!(a, b, "{name}: loading the drive changed the results");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_loaded_drive_runs_as_the_aged_one() {
    let small = "preset = \"paper-c\"\ncapacity = \"2GiB\"";
    round_trip("aged", &scenario(small, "state = \"aged\"\nfill = 0.9", ""));
    round_trip("workload", &scenario(small, "state = \"workload\"", ""));
    round_trip("fill", &scenario(small, "state = \"sequential-fill\"\nfill = 0.5", ""));
    // The victim policy's own random stream continues where aging left it.
    round_trip("rga", &scenario(&format!("{small}\n[device.ftl]\ngc_victim = \"rga\""), "state = \"aged\"", ""));
    // Cost-benefit reads the blocks' ages (the write sequence).
    round_trip("cost-benefit", &scenario(&format!("{small}\n[device.ftl]\ngc_victim = \"cost-benefit\""), "state = \"aged\"", ""));
    // DFTL: the translation pages and their directory.
    round_trip(
        "dftl",
        &scenario(&format!("{small}\n[device.ftl]\nmapping = \"dftl\"\n[device.ftl.cmt]\npages = 64"), "state = \"workload\"", ""),
    );
    // Data placement: each placement's open blocks, every unit's placement, the handles'
    // ledger; the tenants' data aged through their own handles (one persistently isolated).
    round_trip(
        "fdp",
        &scenario(&format!("{small}\n[device.fdp]\nhandles = 3\npersistent = [1]\nper_tenant = true"), "state = \"aged\"", ""),
    );
    round_trip("streams", &scenario(&format!("{small}\n[device.streams]\nstreams = 2\nper_tenant = true"), "state = \"workload\"", ""));
    // An open-channel drive with its host FTL.
    round_trip("open-channel", &scenario("preset = \"cosmos\"\ncapacity = \"16GiB\"", "state = \"aged\"", ""));
}

#[test]
fn what_the_run_does_after_aging_is_not_part_of_the_drive() {
    let d = dir("key");
    let text = scenario("preset = \"paper-c\"\ncapacity = \"2GiB\"", "state = \"aged\"", "");
    Simulator::new(load(&text, &d)).unwrap().save_drive_state(&d.join("drive.fmstate")).unwrap();
    // Another scheduler and run time load the same drive.
    let other = with_state(&text).replace("time = \"2s\"", "time = \"500ms\"\n[host]\nscheduler = \"cfq\"");
    let mut sim = Simulator::new(load(&other, &d)).unwrap();
    sim.run();
    assert!(sim.finish().requests_completed > 0);
    // ... and the state file is not part of the configuration hash: the results say the same.
    assert_eq!(load(&text, &d).config_hash(), load(&with_state(&text), &d).config_hash());
    std::fs::remove_dir_all(&d).unwrap();
}

/// The error of building `text` (with `state_file`) in `d`.
fn refused(d: &Path, text: &str) -> String {
    match Simulator::new(load(&with_state(text), d)) {
        Err(e @ SimError::DriveState(_)) => e.to_string(),
        Err(e) => panic!("expected a drive state error, got {e}"),
        Ok(_) => panic!("a bad drive state was accepted"),
    }
}

#[test]
fn a_drive_of_another_scenario_is_refused_with_what_differs() {
    let d = dir("mismatch");
    let text = scenario("preset = \"paper-c\"\ncapacity = \"2GiB\"", "state = \"aged\"\nfill = 0.9", "");
    Simulator::new(load(&text, &d)).unwrap().save_drive_state(&d.join("drive.fmstate")).unwrap();
    let e = refused(&d, &text.replace("seed = 5", "seed = 6"));
    assert!(e.starts_with("precondition.state_file: "), "{e}");
    assert!(e.contains("drive.fmstate: saved from another drive or preconditioning (paper-c, "), "{e}");
    assert!(e.contains("seed 5 (this scenario: 6)"), "{e}");
    assert!(e.contains("flashmux age --save"), "{e}");
    let e = refused(&d, &text.replace("fill = 0.9", "fill = 0.8"));
    assert!(e.contains("precondition aged fill 0.9 (this scenario: aged fill 0.8)"), "{e}");
    let e = refused(&d, &text.replace("capacity = \"2GiB\"", "capacity = \"3GiB\""));
    assert!(e.contains("the device differ"), "{e}");
    let e = refused(&d, &text.replace("name = \"rand\"", "name = \"rand\"\nregion = { offset = \"1536MiB\", size = \"256MiB\" }"));
    assert!(e.contains("the regions differ"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_damaged_file_is_refused_never_a_panic() {
    let d = dir("damaged");
    let text = scenario("preset = \"paper-c\"\ncapacity = \"2GiB\"", "state = \"aged\"", "");
    let path = d.join("drive.fmstate");
    Simulator::new(load(&text, &d)).unwrap().save_drive_state(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let put = |bytes: &[u8]| std::fs::write(&path, bytes).unwrap();

    // Truncated anywhere: in the magic, the header, the tables, the checksum.
    for cut in [3, 20, 200, good.len() / 2, good.len() - 40, good.len() - 1] {
        put(&good[..cut]);
        let e = refused(&d, &text);
        assert!(
            e.contains("truncated") || e.contains("not a flashmux drive state") || e.contains("does not parse"),
            "cut at {cut}: {e}"
        );
    }
    // One bit flipped in the tables: the checksum says so.
    let mut flipped = good.clone();
    let at = good.len() - 1000;
    flipped[at] ^= 1;
    put(&flipped);
    let e = refused(&d, &text);
    assert!(e.contains("checksum does not match") || e.contains("damaged"), "{e}");
    // A flip in the checksum itself.
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 0x80;
    put(&flipped);
    assert!(refused(&d, &text).contains("its checksum does not match its contents"));
    // Extra bytes.
    let mut longer = good.clone();
    longer.extend_from_slice(b"more");
    put(&longer);
    assert!(refused(&d, &text).contains("4 bytes past its end"), "{}", refused(&d, &text));
    // Not a drive state; another format version.
    put(b"# a scenario file, not a drive\n");
    assert!(refused(&d, &text).contains("not a flashmux drive state"));
    let mut v2 = good.clone();
    v2[16] = 2;
    put(&v2);
    assert!(refused(&d, &text).contains("drive state format 2: this flashmux reads format 1"), "{}", refused(&d, &text));
    // Missing; a directory.
    std::fs::remove_file(&path).unwrap();
    assert!(refused(&d, &text).contains("drive.fmstate: cannot open it: No such file"), "{}", refused(&d, &text));
    std::fs::create_dir(&path).unwrap();
    let e = refused(&d, &text);
    assert!(e.contains("not a regular file") || e.contains("cannot"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn nothing_to_save_or_load_without_flash_or_before_aging_ends() {
    let d = dir("null");
    let null = "[device]\npreset = \"null\"\n[[tenant]]\nname = \"t\"\nfio = \"\"\"\n[w]\nrw=randwrite\nnumber_ios=10\n\"\"\"\n";
    let sim = Simulator::new(load(null, &d)).unwrap();
    let e = sim.save_drive_state(&d.join("x")).unwrap_err().to_string();
    assert!(e.contains("a null device has no drive to save"), "{e}");
    let e = match Simulator::new(load(&null.replace("[[tenant]]", "[precondition]\nstate_file = \"x\"\n[[tenant]]"), &d)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(e.contains("a null device has no drive state to load"), "{e}");
    // After the run has started the drive is not what aging left.
    let text = scenario("preset = \"paper-c\"\ncapacity = \"2GiB\"", "state = \"sequential-fill\"", "");
    let mut sim = Simulator::new(load(&text, &d)).unwrap();
    sim.run_for(10);
    let e = sim.save_drive_state(&d.join("late.fmstate")).unwrap_err().to_string();
    assert!(e.contains("the run has started"), "{e}");
    // An interrupted aging is not saved.
    let sim = Simulator::new_polling(load(&scenario("preset = \"paper-c\"\ncapacity = \"2GiB\"", "state = \"aged\"", ""), &d), &|| true).unwrap();
    let e = sim.save_drive_state(&d.join("cut.fmstate")).unwrap_err().to_string();
    assert!(e.contains("preconditioning was interrupted"), "{e}");
    assert!(!d.join("cut.fmstate").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_empty_state_file_key_is_refused_with_its_line() {
    let text = scenario("preset = \"paper-c\"", "state = \"aged\"\nstate_file = \" \"", "");
    let e = Scenario::from_toml(&text, "s.toml", Path::new(".")).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("s.toml:") && e.contains("precondition.state_file: empty"), "{e}");
}
