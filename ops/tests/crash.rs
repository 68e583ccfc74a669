//! Process-level tests of the `paros` binary: SIGKILL under load, restart, verify; the exit
//! code of a wiped store; the exit code of a storage fault (a full disk).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn paros() -> Command {
    Command::new(env!("CARGO_BIN_EXE_paros"))
}

fn ack_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

fn bench_until_acks(dir: &Path, acks: &Path, min_acks: usize) -> std::process::Child {
    let mut child = paros()
        .args(["bench", "--writers", "8", "--journals", "4", "--batch", "4", "--duration-s", "60"])
        .arg("--data-dir")
        .arg(dir)
        .arg("--ack-log")
        .arg(acks)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("paros bench starts");
    let started = Instant::now();
    while ack_lines(acks) < min_acks {
        assert!(started.elapsed() < Duration::from_secs(60), "the bench acknowledged too little");
        assert!(child.try_wait().unwrap().is_none(), "the bench exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
fn a_cell_killed_mid_load_restarts_with_every_acknowledged_write_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cell");
    let acks = dir.path().join("acks.log");
    for round in 0..2 {
        let mut child = bench_until_acks(&data, &acks, 300 * (round + 1));
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        let out = paros()
            .args(["verify", "--data-dir"])
            .arg(&data)
            .arg("--ack-log")
            .arg(&acks)
            .output()
            .expect("paros verify runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "verify failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        let checked: usize = stdout.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a count");
        assert!(checked >= 300, "verify checked the acknowledged records: {stdout}");
    }
}

#[test]
fn a_wiped_store_refuses_to_boot_with_exit_code_78() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cell");
    let acks = dir.path().join("acks.log");
    let mut child = bench_until_acks(&data, &acks, 10);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(data.join("node-1")).unwrap();
    let out = paros().args(["verify", "--data-dir"]).arg(&data).arg("--ack-log").arg(&acks).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wiped"), "the refusal says why");
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct TinyDisk {
    dir: tempfile::TempDir,
}

impl TinyDisk {
    fn mount(bytes: u64) -> TinyDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "mounting a {bytes}-byte tmpfs (needs root)");
        TinyDisk { dir }
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn a_full_disk_stops_the_process_with_exit_code_75() {
    if !running_as_root() {
        // Mounting the small filesystem needs root; CI runs as root, so there it always runs.
        eprintln!("a_full_disk_stops_the_process_with_exit_code_75: not root, cannot mount a tmpfs; not run");
        return;
    }
    let disk = TinyDisk::mount(3 << 20);
    let out = paros()
        .args([
            "bench",
            "--writers",
            "8",
            "--journals",
            "8",
            "--batch",
            "64",
            "--record-bytes",
            "1000",
            "--duration-s",
            "60",
        ])
        .arg("--data-dir")
        .arg(disk.dir.path().join("cell"))
        .stdout(Stdio::null())
        .output()
        .expect("paros bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    // Printed by a node whose round failed to write or sync (not a boot error).
    assert!(
        stderr.contains("storage fault on node") && stderr.contains("No space left"),
        "the fault says why: {stderr}"
    );
}
