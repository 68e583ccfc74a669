//! `paros dev` as a newcomer runs it: start, sign up, create, write, read with the CLI; stop
//! with SIGINT (exit 0); start again on the same data and find every record.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{paros, start, start_admin, start_with, stop};

/// `GET path` over a plain connection: the whole answer, head and body.
fn http_get(url: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let host = url.strip_prefix("http://").expect("an http URL");
    let mut conn = std::net::TcpStream::connect(host).expect("the gateway listens");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(conn, "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("an answer");
    answer
}

fn cli(url: &str, token: Option<&str>, args: &[&str], stdin: Option<&str>) -> (i32, String) {
    let mut cmd = paros();
    cmd.args(args).env("PAROS_URL", url).env_remove("PAROS_TOKEN");
    if let Some(t) = token {
        cmd.env("PAROS_TOKEN", t);
    }
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the CLI runs");
    if let Some(input) = stdin {
        use std::io::Write as _;
        child.stdin.take().expect("piped").write_all(input.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("the CLI exits");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Signs up tenant `acme` with the CLI: its token.
fn sign_up(url: &str) -> String {
    let (code, out) = cli(url, None, &["signup", "acme", "--json"], None);
    assert_eq!(code, 0, "signup: {out}");
    let signup: serde_json::Value = serde_json::from_str(&out).expect("signup prints JSON");
    signup["token"].as_str().expect("a token").to_owned()
}

/// Creates journal `orders`, writes two records with the CLI and reads them back.
fn write_and_read_orders(url: &str, token: &str) {
    assert_eq!(cli(url, Some(token), &["journal", "create", "orders"], None).0, 0);
    assert_eq!(cli(url, Some(token), &["write", "orders", "first", "second"], None).0, 0);
    let (code, out) = cli(url, Some(token), &["read", "orders", "--from", "0"], None);
    assert_eq!((code, out.as_str()), (0, "0\tfirst\n1\tsecond\n"));
}

#[test]
fn paros_dev_serves_the_cli_stops_on_sigint_and_keeps_every_record_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("paros-data");
    let (child, url) = start(&data);

    let token = sign_up(&url);

    assert_eq!(cli(&url, Some(&token), &["journal", "create", "orders"], None).0, 0);
    assert_eq!(cli(&url, Some(&token), &["write", "orders", "first", "second"], None).0, 0);
    assert_eq!(cli(&url, Some(&token), &["write", "orders"], Some("third\nfourth\n")).0, 0);
    let (code, out) = cli(&url, Some(&token), &["read", "orders", "--from", "0"], None);
    assert_eq!(code, 0);
    assert_eq!(out, "0\tfirst\n1\tsecond\n2\tthird\n3\tfourth\n");
    let (code, _) = cli(&url, Some("not-a-token"), &["read", "orders", "--from", "0"], None);
    assert_eq!(code, 6, "a bad token exits 6");
    // paros dev gives the gateway its machines' counters: /metrics carries one series per
    // machine (three voters, two read replicas), each replica's state, and the tenant's writes
    // and the refused token are counted.
    let metrics = http_get(&url, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert_eq!(
        metrics.lines().filter(|l| l.starts_with("paros_gateway_node_rounds_total{node=")).count(),
        5,
        "{metrics}"
    );
    assert_eq!(
        metrics.lines().filter(|l| l.starts_with("paros_gateway_node_store_disk_bytes{node=")).count(),
        5,
        "{metrics}"
    );
    assert_eq!(
        metrics.lines().filter(|l| l.starts_with("paros_gateway_replica_state{") && l.ends_with(" 1")).count(),
        2,
        "each of the two replicas is in one state: {metrics}"
    );
    // Each replica's journals by lag: the histogram's last bucket counts every journal it
    // hosts (`orders` at least).
    let all_journals: Vec<u64> = metrics
        .lines()
        .filter(|l| l.starts_with("paros_gateway_replica_journals_lag_slots{") && l.contains("le=\"+Inf\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(all_journals.len(), 2, "{metrics}");
    assert!(all_journals.iter().all(|n| *n >= 1), "{metrics}");
    assert!(
        metrics.lines().any(|l| l.starts_with("paros_gateway_tenant_records_total{")
            && l.contains("direction=\"written\"")
            && l.ends_with(" 4")),
        "{metrics}"
    );
    assert!(metrics.lines().any(|l| l == "paros_gateway_auth_refusals_total{reason=\"not_jwt\"} 1"), "{metrics}");
    // `paros write` writes over append sessions (one per write verb), not one request per batch.
    let posts = |route: &str| {
        let series = format!("paros_gateway_requests_total{{method=\"POST\",route=\"{route}\",status=\"200\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(series.as_str())).map_or(0, |v| v.parse::<u64>().unwrap())
    };
    assert_eq!(posts("/v1/journals/{name}/session"), 2, "{metrics}");
    assert_eq!(posts("/v1/journals/{name}/records"), 0, "{metrics}");

    // A live stdin: each line is written as it arrives, not when stdin ends.
    assert_eq!(cli(&url, Some(&token), &["journal", "create", "live"], None).0, 0);
    let mut writer = paros()
        .args(["write", "live"])
        .env("PAROS_URL", &url)
        .env("PAROS_TOKEN", &token)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the CLI runs");
    let mut input = writer.stdin.take().expect("piped");
    for (i, line) in ["early", "later"].iter().enumerate() {
        use std::io::Write as _;
        writeln!(input, "{line}").expect("stdin");
        input.flush().expect("stdin");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (_, out) = cli(&url, Some(&token), &["read", "live", "--from", "0"], None);
            if out.lines().count() == i + 1 {
                assert!(out.ends_with(&format!("{i}\t{line}\n")), "{out}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "line {i} not written while stdin is open: {out}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    drop(input);
    assert!(writer.wait().expect("the CLI exits").success());
    stop(child);

    let (child, url) = start(&data);
    let (code, out) = cli(&url, Some(&token), &["read", "orders", "--from", "0"], None);
    assert_eq!(code, 0, "the tenant's token still works after the restart");
    assert_eq!(out, "0\tfirst\n1\tsecond\n2\tthird\n3\tfourth\n", "nothing was lost");
    stop(child);
}

/// `paros dev --nodes 5`: five nodes, the operator drains one with the CLI, and the registry
/// moves every seat it held to the others through the journals' own logs (issue 34) — the
/// records stay, the drained node ends with no seat, and the moves are counted done.
#[test]
fn paros_dev_with_five_nodes_drains_one_with_the_cli_and_its_seats_move() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("paros-data");
    let (child, url, admin) = start_admin(&data, &["--nodes", "5"]);
    let token = sign_up(&url);
    for j in ["a", "b", "c"] {
        assert_eq!(cli(&url, Some(&token), &["journal", "create", j], None).0, 0);
        assert_eq!(cli(&url, Some(&token), &["write", j, "one", "two"], None).0, 0);
    }
    let status = |url: &str| -> serde_json::Value {
        let (code, out) = cli(url, Some(&admin), &["cell", "status", "--json"], None);
        assert_eq!(code, 0, "cell status: {out}");
        serde_json::from_str(&out).expect("JSON")
    };
    let nodes: Vec<serde_json::Value> = status(&url)["machines"]
        .as_array()
        .expect("machines")
        .iter()
        .filter(|m| m["role"] == "node")
        .cloned()
        .collect();
    assert_eq!(nodes.len(), 5, "five nodes: {nodes:?}");
    let busiest = nodes.iter().max_by_key(|m| m["seats"].as_u64()).expect("a node");
    let drained = busiest["node"].as_str().expect("an id").to_owned();
    assert!(busiest["seats"].as_u64() > Some(0));
    let (code, out) = cli(&url, Some(&admin), &["cell", "drain", &drained], None);
    assert_eq!(code, 0, "drain: {out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let s = status(&url);
        let seats =
            s["machines"].as_array().unwrap().iter().find(|m| m["node"] == drained.as_str()).unwrap()["seats"].as_u64();
        if seats == Some(0) && s["moves_total"] == 0 {
            assert!(s["moves_done"].as_u64() >= busiest["seats"].as_u64(), "every seat moved: {s}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the drain did not finish: {s}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    for j in ["a", "b", "c"] {
        let (code, out) = cli(&url, Some(&token), &["read", j, "--from", "0"], None);
        assert_eq!((code, out.as_str()), (0, "0\tone\n1\ttwo\n"), "journal {j} kept its records");
    }
    stop(child);
}

/// `paros dev --replicas 0`: a cell with no read tier (like for like with a three-server log
/// that has none): every read is a voter's, and the cell status lists no replica.
#[test]
fn paros_dev_without_replicas_serves_reads_from_its_voters() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("paros-data");
    let (child, url, admin) = start_admin(&data, &["--replicas", "0"]);
    let token = sign_up(&url);
    write_and_read_orders(&url, &token);
    let (code, out) = cli(&url, Some(&admin), &["cell", "status", "--json"], None);
    assert_eq!(code, 0, "cell status: {out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let roles: Vec<&str> =
        status["machines"].as_array().expect("machines").iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["node", "node", "node"], "three nodes and no replica: {status}");
    stop(child);
}

/// `paros dev --lab-null-writes` (the door's floor, docs/lab/door.md): writes are answered and
/// read back through the gateway, and the cell never holds them — started again without the
/// flag on the same data, the journal exists (the registry is the cell's) and is empty.
#[test]
fn paros_dev_lab_null_writes_answers_writes_the_cell_never_holds() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("paros-data");
    let (child, url, _) = start_admin(&data, &["--replicas", "0", "--lab-null-writes"]);
    let token = sign_up(&url);
    write_and_read_orders(&url, &token);
    stop(child);
    let (child, url, _) = start_admin(&data, &["--replicas", "0"]);
    let (code, out) = cli(&url, Some(&token), &["read", "orders", "--from", "0"], None);
    assert_eq!((code, out.as_str()), (0, ""), "the cell holds none of the floor's writes");
    stop(child);
}

fn kid_of(data: &Path) -> String {
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("gateway-key.json")).unwrap()).unwrap();
    file["kid"].as_str().unwrap().to_owned()
}

#[test]
fn paros_dev_rotates_its_signing_key_and_retires_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("paros-data");
    let (child, url) = start(&data);
    let old_token = sign_up(&url);
    let old_kid = kid_of(&data);
    stop(child);

    let (child, url) = start_with(&data, &["--rotate-key"]);
    let new_kid = kid_of(&data);
    assert_ne!(old_kid, new_kid, "a fresh key signs");
    assert_eq!(cli(&url, Some(&old_token), &["journal", "list"], None).0, 0, "the old key's token is still good");
    let (code, out) = cli(&url, Some(&old_token), &["token", "mint", "--scope", "owner", "--json"], None);
    assert_eq!(code, 0, "mint: {out}");
    let new_token = serde_json::from_str::<serde_json::Value>(&out).unwrap()["token"].as_str().unwrap().to_owned();
    stop(child);

    let (child, url) = start_with(&data, &["--retire-key", &old_kid]);
    assert_eq!(cli(&url, Some(&old_token), &["journal", "list"], None).0, 6, "the retired key's token is refused");
    assert_eq!(cli(&url, Some(&new_token), &["journal", "list"], None).0, 0, "the new key's token is good");
    stop(child);

    let refused = paros()
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--retire-key", &new_kid])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "the key signing now is not retired");
}

/// The indented lines of the README block under `heading`, up to the next heading.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = readme.find(heading).unwrap_or_else(|| panic!("the README has {heading:?}"));
    let rest = &readme[start + heading.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    rest[..end].lines().filter_map(|l| l.strip_prefix("    ")).map(str::to_owned).collect()
}

/// Runs `script` twice in one bash with `PAROS_URL` set and `paros` as the built binary, as a
/// newcomer pasting the README's lines twice into one terminal; returns what it printed.
fn run_twice(url: &str, lines: &[String]) -> String {
    let bin = env!("CARGO_BIN_EXE_paros");
    let block = lines.join("\n");
    let script = format!("set -e\nparos() {{ \"{bin}\" \"$@\"; }}\n{block}\necho\n{block}\n");
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("PAROS_URL", url)
        .env_remove("PAROS_TOKEN")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn the_readme_cli_and_curl_lines_work_when_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(&dir.path().join("paros-data"));

    // The alias and the URL are the test's own; `tail` follows forever, so it is left out.
    let cli: Vec<String> = readme_block("### Five lines with the CLI")
        .into_iter()
        .filter(|l| !l.starts_with("alias ") && !l.starts_with("export PAROS_URL") && !l.starts_with("paros tail"))
        .collect();
    assert!(cli.iter().any(|l| l.starts_with("paros read")), "{cli:?}");
    let out = run_twice(&url, &cli);
    assert_eq!(out.matches("third").count(), 2, "each run reads its three records: {out}");

    let curl = readme_block("### The same with curl");
    assert_eq!(curl.len(), 5, "{curl:?}");
    let out = run_twice(&url, &curl);
    assert_eq!(out.matches("aGVsbG8=").count(), 2, "each run reads its record back: {out}");
    assert!(!out.contains("\"code\""), "no line was refused: {out}");
    stop(child);
}
