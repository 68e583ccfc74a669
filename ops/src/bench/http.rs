//! A run against a running gateway over HTTP.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use paros_client::{Client, ClientConfig, GatewayClient, HttpConfig, HttpService};
use paros_embedded::random_u64;

use super::drive::{claim_all, drive, verify};
use super::read::ReadSetup;
use super::report::{Report, report};
use super::{BENCH_TENANT, BenchArgs, BenchError, Shared, cpu_s, shared};

/// Journal creates over HTTP in flight at once.
pub(super) const HTTP_CREATES_IN_FLIGHT_MAX: usize = 16;

/// A tenant name no earlier run took: `bench-` and 16 hex digits.
pub(super) fn fresh_tenant_name() -> paros_api::TenantName {
    paros_api::TenantName::parse(&format!("bench-{:016x}", random_u64())).expect("a valid tenant name")
}

/// The bench's journals at the gateway, `j0`, `j1`, …: created with `POST /v1/journals`, or
/// reused when the tenant holds them already (409 `name_taken`). How many were created.
pub(super) async fn http_journals(
    g: &GatewayClient,
    journals: usize,
    shared: &Arc<Shared>,
) -> Result<(Vec<(usize, paros_api::JournalName)>, usize), BenchError> {
    let mut pending = tokio::task::JoinSet::new();
    let mut created = 0;
    let mut names = Vec::new();
    let mut join = |done: Result<Result<bool, BenchError>, tokio::task::JoinError>| -> Result<(), BenchError> {
        if done.map_err(|e| BenchError::Gateway(e.to_string()))?? {
            created += 1;
        }
        Ok(())
    };
    for i in 0..journals {
        let name = paros_api::JournalName::parse(&format!("{}{i}", BENCH_TENANT.1)).expect("a valid journal name");
        names.push((i, name.clone()));
        if pending.len() >= HTTP_CREATES_IN_FLIGHT_MAX {
            join(pending.join_next().await.expect("a task is pending"))?;
        }
        let (g, shared) = (g.clone(), Arc::clone(shared));
        pending.spawn(async move {
            let request = paros_api::CreateJournalRequest { name, mode: None, tier: None };
            loop {
                match g.create_journal(&request).await {
                    Ok(_) => return Ok(true),
                    Err(e) if e.code() == Some(paros_api::ErrorCode::NameTaken) => return Ok(false),
                    Err(e @ paros_client::GatewayError::Denied(paros_client::Denial { status: 429 | 503, .. })) => {
                        // Over the requests/s quota, or the registry slow to show it: wait.
                        let code = e.code();
                        if !matches!(code, Some(paros_api::ErrorCode::OverQuota | paros_api::ErrorCode::Unavailable)) {
                            return Err(BenchError::Registry(format!("creating journal {i}: {e}")));
                        }
                        if code == Some(paros_api::ErrorCode::OverQuota) {
                            shared.over_quota.fetch_add(1, Ordering::Relaxed);
                        }
                        let retry_after_s = e.denial().and_then(|d| d.retry_after_s);
                        tokio::time::sleep(Duration::from_secs(retry_after_s.unwrap_or(1))).await;
                    }
                    Err(e) => return Err(BenchError::Registry(format!("creating journal {i}: {e}"))),
                }
            }
        });
    }
    while let Some(done) = pending.join_next().await {
        join(done)?;
    }
    Ok((names, created))
}

pub(super) async fn run_http(args: BenchArgs, url: &str) -> Result<Report, BenchError> {
    if args.data_dir.is_some() || args.idle_journals > 0 {
        return Err(BenchError::Args(
            "--data-dir and --idle-journals are the embedded cell's: not with --target".into(),
        ));
    }
    let gateway = |e: paros_client::GatewayError| BenchError::Gateway(e.to_string());
    let config = HttpConfig { http2: !args.http1, sessions: args.session, ..HttpConfig::default() };
    let roots = match &args.ca_file {
        Some(path) => {
            std::fs::read(path).map_err(|e| BenchError::Args(format!("--ca-file {}: {e}", path.display())))?
        }
        None => Vec::new(),
    };
    let anonymous = GatewayClient::trusting(url, None, config, &roots).map_err(gateway)?;
    let token = match &args.token {
        Some(t) => paros_api::Token::parse(t).map_err(|e| BenchError::Args(format!("--token: {e}")))?,
        None => anonymous.signup(&fresh_tenant_name()).await.map_err(gateway)?.answer.token,
    };
    let g = anonymous.with_token(&token).map_err(gateway)?;
    let metrics = g.clone();
    let shared = shared(&args)?;
    let started = Instant::now();
    let (names, journals_created) = http_journals(&g, args.journals, &shared).await?;
    let client = Client::new(HttpService::from_gateway(g), ClientConfig::default())
        .map_err(|e| BenchError::Args(e.to_string()))?;
    let journals = claim_all(&client, names, &shared, args.in_flight).await?;
    let placement_s = started.elapsed().as_secs_f64();
    let before = gateway_metrics(&metrics).await;
    let own_before = cpu_s();
    // The gateway does not say which server answered a read: no voters to tell replicas by.
    let readers = ReadSetup { client: client.clone(), voters: None };
    let (elapsed, reads) = drive(&journals, &args, &shared, Some(readers)).await?;
    let own_spent = cpu_s() - own_before;
    let after = gateway_metrics(&metrics).await;
    let verified = verify(&client, &journals, &shared, args.record_bytes).await?;
    let mut report = report(&args, &shared, elapsed, verified);
    report.reads = reads;
    report.target = "http";
    report.transport =
        format!("{}{}", if args.http1 { "http1" } else { "http2" }, if args.session { "+session" } else { "" });
    report.placement_s = placement_s;
    report.journals_created = journals_created;
    if report.acked_records > 0 {
        report.cpu_us_per_record = own_spent * 1e6 / report.acked_records as f64;
    }
    if let (Some(before), Some(after)) = (&before, &after) {
        let (lines, writes) = (
            counter(after, SESSION_LINES) - counter(before, SESSION_LINES),
            counter(after, SESSION_WRITES) - counter(before, SESSION_WRITES),
        );
        report.session_lines_per_write = (writes > 0.0).then(|| lines / writes);
    }
    let cpu = |text: &Option<String>| text.as_deref().map(thread_cpu_series).filter(|roles| !roles.is_empty());
    if let (Some(before), Some(after)) = (cpu(&before), cpu(&after))
        && report.acked_records > 0
    {
        let per_record = |s: f64| s * 1e6 / report.acked_records as f64;
        for ((role, b), (_, a)) in before.iter().zip(&after) {
            report.target_cpu_split.insert(role.clone(), per_record((a - b).max(0.0)));
        }
        report.target_cpu_us_per_record = report.target_cpu_split.values().sum();
    }
    Ok(report)
}

/// The series the gateway's process counts its CPU in, by thread role.
const THREAD_CPU: &str = "paros_gateway_thread_cpu_seconds_total{role=\"";

/// The series the gateway counts its sessions' lines in, and the Writes they travelled in.
const SESSION_LINES: &str = "paros_gateway_session_lines_total";
const SESSION_WRITES: &str = "paros_gateway_session_writes_total";

/// The gateway's `/metrics` (Prometheus text), `None` when it cannot be read.
async fn gateway_metrics(gateway: &GatewayClient) -> Option<String> {
    let (status, body) = gateway.operator_get(&["metrics"]).await.ok()?;
    (status == 200).then(|| String::from_utf8_lossy(&body).into_owned())
}

/// A counter without labels in a Prometheus text; 0 when absent.
fn counter(text: &str, name: &str) -> f64 {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok()).unwrap_or(0.0)
}

/// The `(role, seconds)` of every thread CPU series in a Prometheus text, in their order.
pub(super) fn thread_cpu_series(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(THREAD_CPU)?;
            let (role, value) = rest.split_once("\"}")?;
            Some((role.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod session_tests {
    use super::counter;

    #[test]
    fn a_counter_is_read_by_its_exact_name() {
        let text = "# TYPE paros_gateway_session_lines counter\n\
                    paros_gateway_session_lines_total 40\n\
                    paros_gateway_session_writes_total 3\n";
        assert_eq!(counter(text, "paros_gateway_session_lines_total"), 40.0);
        assert_eq!(counter(text, "paros_gateway_session_writes_total"), 3.0);
        assert_eq!(counter(text, "paros_gateway_session_lines"), 0.0, "a prefix of a name is not the name");
        assert_eq!(counter(text, "paros_gateway_absent_total"), 0.0);
    }
}
