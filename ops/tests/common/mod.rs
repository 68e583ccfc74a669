//! Starting and stopping `paros dev` from a test, as a newcomer runs it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The built `paros` binary.
pub fn paros() -> Command {
    Command::new(env!("CARGO_BIN_EXE_paros"))
}

/// A running `paros dev`: stopped with [`stop`], and killed if the test ends first (a failed
/// assertion), so no cell outlives its test.
pub struct Dev(Option<Child>);

impl Drop for Dev {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `paros dev` on a free port; returns it and its URL.
pub fn start(data: &Path) -> (Dev, String) {
    start_with(data, &[])
}

/// Starts `paros dev` on a free port with extra flags; returns it and its URL.
pub fn start_with(data: &Path, flags: &[&str]) -> (Dev, String) {
    let (child, url, _) = start_admin(data, flags);
    (child, url)
}

/// Starts `paros dev` on a free port with extra flags; returns it, its URL and the admin token it
/// printed.
pub fn start_admin(data: &Path, flags: &[&str]) -> (Dev, String, String) {
    let mut child = paros()
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("paros dev starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let first = lines.next().expect("a first line").expect("readable");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .expect("the URL is printed")
        .to_owned();
    let second = lines.next().expect("a second line").expect("readable");
    let admin = second.rsplit(' ').next().expect("the admin token is printed").to_owned();
    std::thread::spawn(move || for _ in lines {});
    (Dev(Some(child)), url, admin)
}

/// Stops `paros dev` with SIGINT and checks it exits 0.
pub fn stop(mut dev: Dev) {
    let mut child = dev.0.take().expect("running");
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let exit = child.wait().expect("paros dev exits");
    assert_eq!(exit.code(), Some(0), "SIGINT stops paros dev cleanly");
}
