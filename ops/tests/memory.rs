//! Memory follows activity, not retained bytes: the embedded cell writes a journal of several
//! hundred MiB and reads every position back from the start, and the process's peak resident
//! set stays under a bound far below what holding the journal in memory would take (three
//! nodes would hold it three times over).

use std::process::Command;

/// Record bytes written into the one journal.
const JOURNAL_MIB: u64 = 384;

/// The bound on the peak resident set, writing and reading back: the 300 MiB.
const RSS_MAX: u64 = 300 << 20;

#[test]
fn a_journal_of_hundreds_of_mib_is_written_and_read_back_in_bounded_memory() {
    let out = Command::new(env!("CARGO_BIN_EXE_paros"))
        .args(["bench", "--writers", "1", "--journals", "1", "--record-bytes", "16384", "--batch", "16"])
        .args(["--duration-s", "300", "--stop-after-mib", &JOURNAL_MIB.to_string(), "--json"])
        .output()
        .expect("paros bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let acked = report["acked_records"].as_u64().expect("acked_records");
    assert!(acked * 16384 >= JOURNAL_MIB << 20, "the run wrote the whole journal: {report}");
    assert_eq!(report["verified_records"].as_u64(), Some(acked), "every acknowledged position read back: {report}");
    let (write, read) = (report["rss_peak_write_bytes"].as_u64().unwrap(), report["rss_peak_read_bytes"].as_u64().unwrap());
    assert!(write > 0 && read > 0, "{report}");
    assert!(write < RSS_MAX, "writing {JOURNAL_MIB} MiB peaked at {write} bytes resident: {report}");
    assert!(read < RSS_MAX, "reading {JOURNAL_MIB} MiB back peaked at {read} bytes resident: {report}");
}
