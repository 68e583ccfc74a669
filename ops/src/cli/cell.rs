//! The operator's verbs over the gateway's cell routes (issue 34): `paros cell status`, `cell
//! admit`, `cell drain`, `cell retire` and `paros journal move`. They need an admin token
//! (`--token` or `PAROS_TOKEN`; `paros dev` prints one) and take the gateway URL as the tenant
//! verbs do. The operator routes' refusals carry codes of their own (`unknown_machine`,
//! `move_in_progress`, …): they exit by status like the others — 2 for 400, 3 for 404 and
//! 409, 5 for 429 and 503, 4 for 504, 6 for 401 and 403.

use clap::{Args, Subcommand, ValueEnum};
use paros_api::{JournalName, TenantName};
use serde_json::{Value, json};

use super::{Failure, Gateway, connect};

/// `paros cell …` verbs spoken to a gateway (with an admin token).
#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum CellVerb {
    /// Show the cell: every machine (role, zone, standing, liveness, seats), the seat moves in
    /// progress and the journals below full strength.
    Status {
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Admit a machine with its store's incarnation (a new one, or one registered before
    /// without an incarnation).
    Admit {
        /// The machine's id: 1 to 16 hex digits.
        #[arg(value_parser = node_hex)]
        id: String,
        #[arg(long, value_enum, default_value = "node")]
        role: RoleArg,
        /// Where it listens on the bus.
        #[arg(long)]
        bus_address: String,
        /// Its failure zone (`^[a-z0-9][a-z0-9-]{0,62}$`).
        #[arg(long)]
        zone: String,
        /// Its store's incarnation: 1 to 16 hex digits.
        #[arg(long, value_parser = node_hex)]
        incarnation: String,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Drain a machine: no new seat is placed on it.
    Drain {
        #[arg(value_parser = node_hex)]
        node: String,
        #[command(flatten)]
        gateway: Gateway,
    },
    /// Retire a machine for good: its id is never used again.
    Retire {
        #[arg(value_parser = node_hex)]
        node: String,
        #[command(flatten)]
        gateway: Gateway,
    },
}

/// `paros journal move`'s arguments.
#[derive(Args, Debug, PartialEq, Eq)]
pub struct MoveArgs {
    /// The journal, as `tenant/journal` (names).
    #[arg(value_parser = journal_path)]
    pub journal: (TenantName, JournalName),
    /// The voter giving its seat up (1 to 16 hex digits).
    #[arg(long, value_parser = node_hex)]
    pub from: String,
    /// The node taking it (1 to 16 hex digits).
    #[arg(long, value_parser = node_hex)]
    pub to: String,
    #[command(flatten)]
    pub gateway: Gateway,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleArg {
    Node,
    Replica,
    Gateway,
}

impl RoleArg {
    fn as_str(self) -> &'static str {
        match self {
            RoleArg::Node => "node",
            RoleArg::Replica => "replica",
            RoleArg::Gateway => "gateway",
        }
    }
}

fn node_hex(raw: &str) -> Result<String, String> {
    let ok = (1..=16).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_hexdigit());
    if ok && raw.bytes().any(|b| b != b'0') {
        Ok(raw.to_ascii_lowercase())
    } else {
        Err("1 to 16 hex digits, not 0".into())
    }
}

fn journal_path(raw: &str) -> Result<(TenantName, JournalName), String> {
    let (tenant, journal) = raw.split_once('/').ok_or("`tenant/journal`")?;
    let tenant = TenantName::parse(tenant).map_err(|e| format!("the tenant: {e}"))?;
    let journal = JournalName::parse(journal).map_err(|e| format!("the journal: {e}"))?;
    Ok((tenant, journal))
}

impl CellVerb {
    /// Whether the verb was asked for JSON (`--json`).
    #[must_use]
    pub fn wants_json(&self) -> bool {
        match self {
            CellVerb::Status { gateway }
            | CellVerb::Admit { gateway, .. }
            | CellVerb::Drain { gateway, .. }
            | CellVerb::Retire { gateway, .. } => gateway.json,
        }
    }
}

/// The answer's JSON when it is a success, else the operator failure it says.
fn answered(status: u16, body: &[u8], read_only: bool) -> Result<Value, Failure> {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    if (200..300).contains(&status) {
        return value.ok_or_else(|| Failure::Operator {
            status,
            code: "contract".into(),
            message: "a success whose body is not JSON".into(),
            read_only,
        });
    }
    let text = |k: &str| value.as_ref().and_then(|v| v[k].as_str()).map(str::to_owned);
    Err(Failure::Operator {
        status,
        code: text("code").unwrap_or_else(|| "contract".into()),
        message: text("message").unwrap_or_else(|| "an error answer without the error body".into()),
        read_only,
    })
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

fn machine_line(m: &Value) -> String {
    let seen = m["seen_s_ago"].as_u64().map_or_else(|| "never seen".to_owned(), |s| format!("seen {s} s ago"));
    let mut line = format!(
        "{} {} zone {} {} {} seats {} joining {} ({seen})",
        s(&m["node"]),
        s(&m["role"]),
        s(&m["zone"]),
        s(&m["standing"]),
        s(&m["liveness"]),
        m["seats"],
        m["joining"],
    );
    if let Some(by) = m["replaced_by"].as_str() {
        line.push_str(&format!(" replaced by {by}"));
    }
    if let Some(old) = m["replaces"].as_str() {
        line.push_str(&format!(" replaces {old}"));
    }
    line
}

fn print_status(c: &Value) {
    let list = |k: &str| c[k].as_array().cloned().unwrap_or_default();
    println!("machines {} of {}", list("machines").len(), c["machines_total"]);
    for m in list("machines") {
        println!("  {}", machine_line(&m));
    }
    println!("moves in progress {}, done {}", c["moves_total"], c["moves_done"]);
    for m in list("moves") {
        println!("  {}", move_line(&m));
    }
    println!("journals below full strength {}", c["below_full_strength_total"]);
    for j in list("below_full_strength") {
        let weak: Vec<String> = j["weak"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| format!("{} ({})", s(&w["node"]), s(&w["why"])))
            .collect();
        println!(
            "  {} weak {}{}",
            s(&j["journal"]),
            weak.join(", "),
            if j["moving"] == true { ", moving" } else { "" }
        );
    }
}

/// Runs a `paros cell` verb.
///
/// # Errors
/// The verb's [`Failure`].
pub async fn execute_cell(verb: CellVerb, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    match verb {
        CellVerb::Status { gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let (status, body) =
                g.operator_get(&["v1", "admin", "cell"]).await.map_err(|e| Failure::from_gateway(e, true))?;
            let c = answered(status, &body, true)?;
            if json {
                println!("{c}");
            } else {
                print_status(&c);
            }
        }
        CellVerb::Admit { id, role, bus_address, zone, incarnation, gateway } => {
            let (g, json) = connect(&gateway, env)?;
            let body = json!({"id": id, "role": role.as_str(), "bus_address": bus_address, "zone": zone,
                "incarnation": incarnation});
            let (status, answer) = g
                .operator_post(&["v1", "admin", "machines"], Some(&body))
                .await
                .map_err(|e| Failure::from_gateway(e, false))?;
            let m = answered(status, &answer, false)?;
            if json {
                println!("{m}");
            } else {
                println!("{} {}", if status == 201 { "admitted" } else { "admitted again" }, machine_line(&m));
            }
        }
        CellVerb::Drain { node, gateway } => standing(&node, "drain", &gateway, env).await?,
        CellVerb::Retire { node, gateway } => standing(&node, "retire", &gateway, env).await?,
    }
    Ok(())
}

async fn standing(
    node: &str,
    action: &str,
    gateway: &Gateway,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Failure> {
    let (g, json) = connect(gateway, env)?;
    let (status, answer) = g
        .operator_post::<Value>(&["v1", "admin", "machines", node, action], None)
        .await
        .map_err(|e| Failure::from_gateway(e, false))?;
    let m = answered(status, &answer, false)?;
    if json {
        println!("{m}");
    } else {
        println!("{}", machine_line(&m));
    }
    Ok(())
}

/// Runs `paros journal move`.
///
/// # Errors
/// The verb's [`Failure`].
pub async fn journal_move(args: MoveArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    let MoveArgs { journal: (tenant, journal), from, to, gateway } = args;
    let (g, json) = connect(&gateway, env)?;
    let segments = ["v1", "admin", "journals", tenant.as_str(), journal.as_str(), "move"];
    let (status, answer) = g
        .operator_post(&segments, Some(&json!({"from": from, "to": to})))
        .await
        .map_err(|e| Failure::from_gateway(e, false))?;
    let m = answered(status, &answer, false)?;
    if json {
        println!("{m}");
    } else {
        println!("moving {} (recorded: in progress until the target holds the journal)", move_line(&m));
    }
    Ok(())
}

/// One move as the status and `journal move` print it.
fn move_line(m: &Value) -> String {
    format!(
        "{} {} -> {} epoch {} recorded at {}",
        s(&m["journal"]),
        s(&m["from"]),
        s(&m["to"]),
        m["epoch"],
        m["recorded_at"]
    )
}
