//! The cell's machines and seats as the operator sees them (issue 34): seats per machine, the
//! seat moves the registry recorded and not yet recorded done, and the journals below full
//! strength — read from the directory in one pass over its journals, with each node's liveness
//! as this gateway knows it. `GET /v1/admin/cell`, `/metrics` and `/ui` all read this.

use std::collections::BTreeMap;

use paros_core::{JournalKey, NodeId};
use paros_registry::{Directory, Journal, Machine, Role, SeatMove, Standing};

/// Whether a machine reports now, as this gateway knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// The cell's node port reported it at this look.
    Alive,
    /// The port reports the cell's nodes and this one is not among them.
    Unseen,
    /// This gateway cannot tell: it was given no node port, or the machine is a gateway (which
    /// reports through no port).
    Unknown,
}

impl Liveness {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Unseen => "unseen",
            Liveness::Unknown => "unknown",
        }
    }

    /// A machine's liveness from the ids the node port reported now (`None`: no port).
    pub(crate) fn of(m: &Machine, reported: Option<&std::collections::BTreeSet<NodeId>>) -> Liveness {
        match (reported, m.role) {
            (_, Role::Gateway) | (None, _) => Liveness::Unknown,
            (Some(r), _) if r.contains(&m.id) => Liveness::Alive,
            (Some(_), _) => Liveness::Unseen,
        }
    }
}

/// Why a voter of a journal does not count toward its full strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weakness {
    /// The registry lists no machine of that id.
    UnknownMachine,
    /// Retired by an operator.
    Retired,
    /// An old identity, replaced by a new one (its store was wiped): it never votes again.
    Replaced,
    /// The node port does not report it now.
    Unseen,
}

impl Weakness {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Weakness::UnknownMachine => "unknown_machine",
            Weakness::Retired => "retired",
            Weakness::Replaced => "replaced",
            Weakness::Unseen => "unseen",
        }
    }
}

/// A node's seats: live journals it votes for, and moves in progress that target it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seats {
    pub(crate) voting: u64,
    pub(crate) joining: u64,
}

/// The survey of the directory's journals.
#[derive(Debug, Default)]
pub(crate) struct Survey<'d> {
    /// Seats per node (only nodes holding or joining one).
    pub(crate) seats: BTreeMap<NodeId, Seats>,
    /// The first `list_max` moves in progress, by journal key.
    pub(crate) moves: Vec<(&'d Journal, SeatMove)>,
    pub(crate) moves_total: u64,
    /// The first `list_max` live journals below full strength, by key, with their weak voters.
    pub(crate) weak: Vec<(&'d Journal, Vec<(NodeId, Weakness)>)>,
    pub(crate) weak_total: u64,
    /// Seat moves the registry recorded done, ever: the sum of every journal's epoch (each
    /// accepted `MoveDone` adds one; deleted journals keep theirs).
    pub(crate) moves_done: u64,
}

/// Why `node`, a voter, does not count toward full strength, if it does not.
fn weakness(d: &Directory, node: NodeId, live: &dyn Fn(&Machine) -> Liveness) -> Option<Weakness> {
    let Some(m) = d.machine(node) else { return Some(Weakness::UnknownMachine) };
    if m.is_replaced() {
        return Some(Weakness::Replaced);
    }
    if m.standing == Standing::Retired {
        return Some(Weakness::Retired);
    }
    (live(m) == Liveness::Unseen).then_some(Weakness::Unseen)
}

/// One pass over the directory's journals; every list holds at most `list_max` entries.
pub(crate) fn survey<'d>(d: &'d Directory, live: &dyn Fn(&Machine) -> Liveness, list_max: usize) -> Survey<'d> {
    let mut s = Survey::default();
    let mut weak_of: BTreeMap<NodeId, Option<Weakness>> = BTreeMap::new();
    for j in d.journals() {
        s.moves_done = s.moves_done.saturating_add(j.epoch.0);
        if !j.is_live() {
            continue;
        }
        let mut weak = Vec::new();
        for &v in &j.voters {
            s.seats.entry(v).or_default().voting += 1;
            if let Some(w) = *weak_of.entry(v).or_insert_with(|| weakness(d, v, live)) {
                weak.push((v, w));
            }
        }
        if let Some(m) = j.moving {
            s.seats.entry(m.to).or_default().joining += 1;
            s.moves_total += 1;
            if s.moves.len() < list_max {
                s.moves.push((j, m));
            }
        }
        if !weak.is_empty() {
            s.weak_total += 1;
            if s.weak.len() < list_max {
                s.weak.push((j, weak));
            }
        }
    }
    s
}

/// `tenant-name/journal-name`, or the ids in hex for a tenant the directory does not know.
pub(crate) fn journal_path(d: &Directory, j: &Journal) -> String {
    let JournalKey { tenant, journal } = j.key;
    match d.tenant(tenant) {
        Some(t) => format!("{}/{}", t.name, j.name),
        // The registry journal: the cell's own, which no tenant holds.
        None if tenant == paros_registry::CELL_TENANT => format!("cell/{}", j.name),
        None => format!("{tenant}/{journal}"),
    }
}

/// The text of a role, as the operator routes write it.
pub(crate) fn role_text(r: Role) -> &'static str {
    match r {
        Role::Node => "node",
        Role::Replica => "replica",
        Role::Gateway => "gateway",
    }
}

/// The text of a standing, as the operator routes write it.
pub(crate) fn standing_text(s: Standing) -> &'static str {
    match s {
        Standing::Registered => "registered",
        Standing::Draining => "draining",
        Standing::Retired => "retired",
    }
}
